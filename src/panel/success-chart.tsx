// An endpoint's success rate: per window (the last 24 hours by the hour, the last 7
// days by 6 hours), the attempts per bucket stacked by outcome and their latency (average inside
// the slowest), drawn as server-rendered SVG. No script and no style attribute (the CSP allows
// neither): the shapes carry classes of panel.css. Readable without the picture: each figure has a
// caption that sums it up, each bucket a <title> (a tooltip), and a table with the numbers.
import { raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { ATTEMPT_OUTCOMES, type AttemptBucket, type AttemptWindow } from '../webhooks/attempt-stats.js';
import type { AttemptOutcomeKind } from '../webhooks/model.js';

const OUTCOME_LABEL: Record<AttemptOutcomeKind, string> = { succeeded: 'succeeded', failed: 'failed', no_response: 'no response' };

// The drawing's own units (the viewBox): it scales to the figure's width.
const WIDTH = 480;
const LEFT = 60;
const RIGHT = 6;
const BARS = { top: 10, bottom: 118 };
const LATENCY = { top: 134, bottom: 176 };
const LABELS_Y = 194;
const HEIGHT = 200;

/** Coordinates to a tenth of a unit. */
const round = (n: number) => Math.round(n * 10) / 10;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** 1, 2, 5, 10, 20, 50, ...: the smallest at or above n (an axis's top). */
function niceCeil(n: number): number {
  if (n <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= n)!;
}

export function latencyText(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

/** "14.3 %", "25 %": one decimal at most. */
function rateText(part: number, whole: number): string {
  return `${Number(((100 * part) / whole).toFixed(1))} %`;
}

const hhmm = (iso: string) => iso.slice(11, 16);
const day = (iso: string) => `${Number(iso.slice(8, 10))} ${MONTHS[Number(iso.slice(5, 7)) - 1]}`;

/** "2025-03-14 09:00–10:00 UTC" */
function periodText(bucket: AttemptBucket): string {
  return `${bucket.from.slice(0, 10)} ${hhmm(bucket.from)}–${hhmm(bucket.to) === '00:00' ? '24:00' : hhmm(bucket.to)} UTC`;
}

function outcomesText(bucket: AttemptBucket): string {
  return ATTEMPT_OUTCOMES.map((o) => `${bucket.byOutcome[o]} ${OUTCOME_LABEL[o]}`).join(', ');
}

/** One sentence for a window or a bucket: attempts, success rate, outcomes, latency. */
export function summaryText(bucket: AttemptBucket): string {
  if (bucket.attempts === 0) return 'no attempts';
  return (
    `${bucket.attempts} ${bucket.attempts === 1 ? 'attempt' : 'attempts'}, ${rateText(bucket.byOutcome.succeeded, bucket.attempts)} succeeded ` +
    `(${outcomesText(bucket)}); latency ${latencyText(bucket.latencyAvgMs!)} on average, ${latencyText(bucket.latencyMaxMs!)} at most`
  );
}

/** The x-axis label under a bucket, or none: every 6 hours of the day, every midnight of the week. */
function tick(window: AttemptWindow, bucket: AttemptBucket): string | null {
  const hour = Number(bucket.from.slice(11, 13));
  if (window.bucketHours === 1) return hour % 6 === 0 ? hhmm(bucket.from) : null;
  return hour === 0 ? day(bucket.from) : null;
}

/** Text and attribute values in markup written by hand (the drawing). */
const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escaped = (text: string | number) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/**
 * The drawing, as markup written here rather than JSX: some 400 elements, which hono/jsx took
 * 50-130 ms to render on a cold process (a page's first views) where this takes about 1 ms. Every
 * text in it is escaped; the numbers are the drawing's own.
 */
function chart(window: AttemptWindow, titleId: string): HtmlEscapedString {
  const slot = (WIDTH - LEFT - RIGHT) / window.buckets.length;
  const barWidth = round(Math.max(1, slot * 0.8));
  const attemptsTop = niceCeil(Math.max(...window.buckets.map((b) => b.attempts)));
  const latencyTop = niceCeil(Math.max(...window.buckets.map((b) => b.latencyMaxMs ?? 0)));
  /** A bar from `above` the bottom of an area, `value` of its `top` high. */
  const bar = (attributes: string, x: number, value: number, top: number, area: { top: number; bottom: number }, above = 0) => {
    const height = (value / top) * (area.bottom - area.top);
    return `<rect ${attributes} x="${x}" y="${round(area.bottom - above - height)}" width="${barWidth}" height="${round(height)}"/>`;
  };
  const buckets = window.buckets.map((bucket, i) => {
    const x = round(LEFT + i * slot + (slot - barWidth) / 2);
    // Stacked: succeeded at the bottom, then failed, then no response.
    let stacked = 0;
    const bars = ATTEMPT_OUTCOMES.filter((o) => bucket.byOutcome[o] > 0)
      .map((outcome) => {
        const rect = bar(`class="bar-${outcome}" data-outcome="${outcome}"`, x, bucket.byOutcome[outcome], attemptsTop, BARS, stacked);
        stacked += (bucket.byOutcome[outcome] / attemptsTop) * (BARS.bottom - BARS.top);
        return rect;
      })
      .join('');
    const latency =
      bucket.latencyMaxMs === null
        ? ''
        : bar('class="latency-max"', x, bucket.latencyMaxMs, latencyTop, LATENCY) +
          bar('class="latency-avg"', x, bucket.latencyAvgMs!, latencyTop, LATENCY);
    const label = tick(window, bucket);
    return (
      `<g class="chart-bucket" data-from="${escaped(bucket.from)}"><title>${escaped(`${periodText(bucket)}: ${summaryText(bucket)}`)}</title>` +
      `<rect class="chart-slot" x="${round(LEFT + i * slot)}" y="${BARS.top}" width="${round(slot)}" height="${LATENCY.bottom - BARS.top}"/>` +
      bars +
      latency +
      (label
        ? `<text class="chart-label chart-label-middle" x="${round(LEFT + (i + 0.5) * slot)}" y="${LABELS_Y}">${escaped(label)}</text>`
        : '') +
      '</g>'
    );
  });
  const axisLabel = (y: number, text: string | number) =>
    `<text class="chart-label chart-label-end" x="${LEFT - 4}" y="${y}">${escaped(text)}</text>`;
  const axis = (y: number) => `<line class="chart-axis" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y}" y2="${y}"/>`;
  return raw(
    `<svg class="chart-drawing" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="${escaped(titleId)}">` +
      `<title id="${escaped(titleId)}">${escaped(`${window.label}: ${summaryText(window.total)}. The table below lists the numbers.`)}</title>` +
      axis(BARS.bottom) +
      axis(LATENCY.bottom) +
      axisLabel(BARS.top + 8, attemptsTop) +
      axisLabel(BARS.bottom, 0) +
      axisLabel(LATENCY.top + 8, latencyText(latencyTop)) +
      axisLabel(LATENCY.bottom, 0) +
      buckets.join('') +
      '</svg>',
  );
}

/** The table's rows, written as the drawing is (about 450 cells: hono/jsx was slow to render them cold). */
function numbersRows(buckets: AttemptBucket[]): HtmlEscapedString {
  const cell = (label: string, value: string | number) => `<td data-label="${escaped(label)}">${escaped(value)}</td>`;
  return raw(
    buckets
      .map(
        (b) =>
          '<tr>' +
          cell('Period', periodText(b)) +
          cell('Attempts', b.attempts) +
          ATTEMPT_OUTCOMES.map((o) => cell(OUTCOME_LABEL[o], b.byOutcome[o])).join('') +
          cell('Success rate', rateText(b.byOutcome.succeeded, b.attempts)) +
          cell('Latency (average)', latencyText(b.latencyAvgMs!)) +
          cell('Latency (slowest)', latencyText(b.latencyMaxMs!)) +
          '</tr>',
      )
      .join(''),
  );
}

function NumbersTable(props: { window: AttemptWindow }) {
  const { window } = props;
  const rows = window.buckets.filter((b) => b.attempts > 0);
  if (rows.length === 0) return null;
  return (
    <details>
      <summary>The numbers per {window.bucketHours === 1 ? 'hour' : `${window.bucketHours} hours`}</summary>
      <table class="labelled chart-numbers">
        <caption>{window.label}, periods with attempts (UTC)</caption>
        <thead>
          <tr>
            <th>Period</th>
            <th>Attempts</th>
            {ATTEMPT_OUTCOMES.map((o) => (
              <th>{OUTCOME_LABEL[o]}</th>
            ))}
            <th>Success rate</th>
            <th>Latency (average)</th>
            <th>Latency (slowest)</th>
          </tr>
        </thead>
        <tbody>{numbersRows(rows)}</tbody>
      </table>
    </details>
  );
}

export function SuccessCharts(props: { windows: AttemptWindow[] }) {
  return (
    <section aria-labelledby="success-rate">
      <h2 id="success-rate">Success rate</h2>
      <ul class="chart-legend" aria-label="Legend">
        {ATTEMPT_OUTCOMES.map((o) => (
          <li>
            <span class={`swatch bar-${o}`}></span>
            {OUTCOME_LABEL[o]}
          </li>
        ))}
        <li>
          <span class="swatch latency-avg"></span>latency, average
        </li>
        <li>
          <span class="swatch latency-max"></span>latency, slowest
        </li>
      </ul>
      <div class="charts">
        {props.windows.map((window) => (
          <figure class="chart" id={`chart-${window.id}`}>
            <figcaption>
              <strong>{window.label}</strong>: {summaryText(window.total)}.
            </figcaption>
            {window.total.attempts > 0 && chart(window, `chart-${window.id}-title`)}
            <NumbersTable window={window} />
          </figure>
        ))}
      </div>
    </section>
  );
}
