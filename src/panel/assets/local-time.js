// Progressive enhancement only: every <time data-local> arrives as UTC text, readable
// without this file (src/panel/time.tsx). Here it shows the viewer's local time, followed by how long
// ago or how soon that is; the UTC text stays in its title, on hover. Refreshed every 30 seconds so
// "2 minutes ago" does not go stale on a page left open.
const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const UNITS = [['year', 365 * 86400], ['month', 30 * 86400], ['week', 7 * 86400], ['day', 86400], ['hour', 3600], ['minute', 60]];

/** "5 minutes ago", "in 3 hours", "now": the largest unit that fits, rounded down. */
function fromNow(at) {
  const seconds = (at - Date.now()) / 1000;
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size) return relative.format(Math.trunc(seconds / size), unit);
  }
  return relative.format(Math.trunc(seconds), 'second');
}

function showLocalTimes() {
  for (const time of document.querySelectorAll('time[data-local]')) {
    const at = Date.parse(time.dateTime);
    if (Number.isNaN(at)) continue;
    time.textContent = absolute.format(at);
    let ago = time.nextElementSibling;
    if (!ago || !ago.classList.contains('ago')) {
      ago = document.createElement('span');
      ago.className = 'ago';
      time.after(' ', ago);
    }
    ago.textContent = `(${fromNow(at)})`;
  }
}

showLocalTimes();
setInterval(showLocalTimes, 30_000);
