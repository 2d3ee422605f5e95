// The README's configuration table, written from the settings' declarations (src/config/settings.ts)
// between two marker comments by `npm run generate`; `generate --check` fails when it is stale.
import { acceptedValues, SETTING_DOCS, SETTINGS } from '../src/config/settings.js';

export const TABLE_START = '<!-- config-table:start -->';
export const TABLE_END = '<!-- config-table:end -->';

/** A cell's text: a `|` would end the cell. */
const cell = (text: string) => text.replace(/\|/g, '\\|');

/** One row per setting, in the order SETTINGS declares them. */
export function configTable(): string {
  const rows = Object.entries(SETTINGS.shape).map(([variable, schema]) => {
    const doc = SETTING_DOCS.get(schema);
    if (!doc) throw new Error(`${variable} has no README row (declare it with a helper of src/config/settings.ts)`);
    return `| \`${variable}\` | ${cell(doc.default)} | ${cell(acceptedValues(doc.accepts))} | ${cell(doc.description)} |`;
  });
  return ['| Variable | Default | Accepted | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** `readme` with the table between its markers made anew. */
export function withConfigTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`the README has no ${TABLE_START} … ${TABLE_END} markers for the configuration table`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${configTable()}\n${readme.slice(end)}`;
}
