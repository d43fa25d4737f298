// The Switchboard TypeScript SDK: the generated operations and types (src/gen, from api/openapi.yaml) and one helper
// that makes a client for a server and an API key. Every operation takes `{ client }` and answers
// `{ data, error, response }`: `error` is the RFC 9457 problem (its `code` is stable) when the status is not 2xx.
import { type Client, createClient, createConfig } from './gen/client/index.js';
import type { ClientOptions } from './gen/types.gen.js';

export * from './gen/index.js';
export type { Client } from './gen/client/index.js';

export interface SwitchboardOptions {
  /** The server's base URL, for example http://localhost:8080 (no trailing /api/v1: operations carry their paths). */
  baseUrl: string;
  /** An API key (sb_sk_…) made at /user/api or with `switchboard key create`; sent as a Bearer token. */
  apiKey: string;
  /** A fetch implementation; the global one by default. */
  fetch?: typeof fetch;
}

/** switchboard makes a client for one server and one key; pass it as `{ client }` to each operation. */
export function switchboard(options: SwitchboardOptions): Client {
  if (!options.apiKey) throw new Error('switchboard: an API key is required');
  return createClient(
    createConfig<ClientOptions>({
      baseUrl: options.baseUrl.replace(/\/+$/, '') as ClientOptions['baseUrl'],
      auth: options.apiKey,
      fetch: options.fetch,
    }),
  );
}
