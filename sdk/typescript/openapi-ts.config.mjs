// Generates src/gen from the contract: `npm run generate` (make generate from the repository root).
// The output is committed; CI regenerates it and fails when it differs (make check-generated).
export default {
  input: '../../api/openapi.yaml',
  output: { path: 'src/gen', importFileExtension: '.js', postProcess: [] },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
};
