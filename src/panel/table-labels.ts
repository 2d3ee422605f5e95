// Every table labelled at phone width. There the stylesheet stacks a table's cells and
// hides its header row (panel.css), and each cell shows its column's heading before it, from its
// data-label. The layout gives every cell of every table on a page that label, from the table's
// own <thead>, so no page (nor a table added later) can forget one; a cell that names its own
// data-label keeps it. It reads markup hono/jsx has just rendered, where text and attribute values
// are escaped: a "<td" can only be a tag, and a heading's text is already fit for an attribute.

const TAG = /<(\/?)(table|thead|tr|th|td)\b([^>]*)>/gi;

interface OpenTable {
  headings: string[];
  inHead: boolean;
  /** The column of the next cell of the current row. */
  column: number;
  /** Where the heading being read starts. */
  headingFrom: number;
}

/** The heading's text: its markup without tags, on one line. */
const textOf = (markup: string) =>
  markup
    .replace(/<[^>]*>/g, '')
    .replace(/\s+/g, ' ')
    .trim();

const spanOf = (attributes: string) => Number(/\scolspan="(\d+)"/i.exec(attributes)?.[1] ?? 1);

/** The markup with `data-label="<column heading>"` on every body cell whose column has a heading. */
export function labelTableCells(html: string): string {
  const open: OpenTable[] = [];
  let out = '';
  let copied = 0;
  for (const match of html.matchAll(TAG)) {
    const [tag, closing, name, attributes] = match as unknown as [string, string, string, string];
    const element = name.toLowerCase();
    const table = open.at(-1);
    let replacement = tag;
    if (element === 'table') {
      if (closing) open.pop();
      else open.push({ headings: [], inHead: false, column: 0, headingFrom: 0 });
    } else if (!table) {
      // A cell outside any table: nothing to label it from.
    } else if (element === 'thead') {
      table.inHead = !closing;
    } else if (element === 'tr') {
      if (!closing) table.column = 0;
    } else if (table.inHead) {
      if (element === 'th' && !closing) table.headingFrom = match.index + tag.length;
      if (element === 'th' && closing) table.headings.push(textOf(html.slice(table.headingFrom, match.index)));
    } else if (!closing) {
      const heading = table.headings[table.column];
      table.column += spanOf(attributes);
      if (heading && !/\sdata-label=/i.test(attributes)) replacement = `<${name}${attributes} data-label="${heading}">`;
    }
    out += html.slice(copied, match.index) + replacement;
    copied = match.index + tag.length;
  }
  return out + html.slice(copied);
}
