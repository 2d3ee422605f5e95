// The configuration table of docs/configuration.md, written from the settings' declarations
// (src/config/settings.ts) between two marker comments by `npm run generate`; `generate --check`
// fails when it is stale.
import { acceptedValues, SETTING_DOCS, SETTINGS } from '../../src/config/settings.js';

/** The page that holds the table, from the repository's root. */
export const CONFIG_DOC = 'docs/configuration.md';
export const TABLE_START = '<!-- config-table:start -->';
export const TABLE_END = '<!-- config-table:end -->';

/** A cell's text: a `|` would end the cell. */
const cell = (text: string) => text.replace(/\|/g, '\\|');

/** One row per setting, in the order SETTINGS declares them. */
export function configTable(): string {
  const rows = Object.entries(SETTINGS.shape).map(([variable, schema]) => {
    const doc = SETTING_DOCS.get(schema);
    if (!doc) throw new Error(`${variable} has no row in the configuration table (declare it with a helper of src/config/settings.ts)`);
    return `| \`${variable}\` | ${cell(doc.default)} | ${cell(acceptedValues(doc.accepts))} | ${cell(doc.description)} |`;
  });
  return ['| Variable | Default | Accepted | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** `page` (the text of `file`) with the table between its markers made anew. */
export function withConfigTable(page: string, file = CONFIG_DOC): string {
  const start = page.indexOf(TABLE_START);
  const end = page.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`${file} has no ${TABLE_START} … ${TABLE_END} markers for the configuration table`);
  return `${page.slice(0, start + TABLE_START.length)}\n${configTable()}\n${page.slice(end)}`;
}
