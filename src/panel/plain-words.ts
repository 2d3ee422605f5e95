// Errors in plain words: a form's invalid field is named by the label the user sees
// beside it ("Receiver URL"), never by the JSON Pointer the admin API names it with ("/url"), and
// the schema's findings are said as a person would ("is required", not "Too small: expected array
// to have >=1 items"). The rules stay the generated schemas' (form.ts); only the words are the panel's.
import type { z } from 'zod';
import type { InvalidParam } from '../shared/problem.js';

/** The labels of a form's fields, by field name (the first segment of the invalid param's name). */
export type FieldLabels = Readonly<Record<string, string>>;

/** "/events/0" → "events"; "after_id" → "after_id". */
const fieldOf = (name: string) => name.replace(/^\//, '').split('/')[0] ?? name;

/** A field without a label on the form: its name, as words ("after_id" → "After id"). */
function wordsOf(field: string): string {
  const words = field.replace(/[_-]+/g, ' ').trim();
  return words ? words[0]!.toUpperCase() + words.slice(1) : 'The form';
}

/** A reason that reads on from the field's name ("is required") follows it; any other after a colon. */
const PREDICATE = /^(is|are|must|has|have|holds|needs|allows|should|can|cannot|does|was)\b/;

/** One sentence per invalid field: "Receiver URL must use https.", "Store: unknown store "x"." */
export function fieldSentence(param: Pick<InvalidParam, 'name' | 'reason'>, labels: FieldLabels = {}): string {
  const field = fieldOf(param.name);
  const label = labels[field] ?? wordsOf(field);
  const reason = param.reason.trim().replace(/\.$/, '');
  return PREDICATE.test(reason) ? `${label} ${reason}.` : `${label}: ${reason}.`;
}

const FORMATS: Record<string, string> = {
  url: 'is not a web address (https://…)',
  datetime: 'is not a date and time',
  date: 'is not a date',
  email: 'is not an e-mail address',
};

/** A schema's finding about a form field, in words that read on from the field's label. */
export function plainReason(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'too_small':
      if (issue.origin === 'array')
        return Number(issue.minimum) === 1 ? 'needs at least one choice' : `needs at least ${issue.minimum} choices`;
      if (issue.origin === 'string') return Number(issue.minimum) === 1 ? 'is required' : `must have at least ${issue.minimum} characters`;
      return `must be at least ${issue.minimum}`;
    case 'too_big':
      if (issue.origin === 'array') return `allows at most ${issue.maximum} choices`;
      if (issue.origin === 'string') return `must have at most ${issue.maximum} characters`;
      return `must be at most ${issue.maximum}`;
    case 'invalid_format':
      return FORMATS[issue.format] ?? 'is not in the expected format';
    case 'invalid_value':
      return `must be one of ${issue.values.map(String).join(', ')}`;
    case 'invalid_type':
      return issue.input === undefined || issue.input === '' ? 'is required' : 'is not valid';
    default: {
      // The generated schemas' own words for lengths counted in characters.
      const length = /^must be at (least|most) (\d+) characters$/.exec(issue.message);
      if (length) return length[1] === 'least' && length[2] === '1' ? 'is required' : `must have at ${length[1]} ${length[2]} characters`;
      return issue.message;
    }
  }
}
