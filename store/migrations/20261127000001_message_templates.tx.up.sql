-- Template messages (WhatsApp Cloud): the template's name, language and placeholder values, as JSON.
ALTER TABLE messages ADD COLUMN template {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}};
