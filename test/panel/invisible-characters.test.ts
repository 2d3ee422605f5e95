// A receiver's answer on a delivery's page, in a real browser: bidirectional controls (U+202E
// reverses what follows it) and other invisible characters are shown as marked code points,
// `<U+202E>`, never raw, so an answer cannot make the page read otherwise than it is; the
// rest of the answer is shown as it came. A real service on a fake clock, the dispatcher driven by
// hand, a real receiver, Chromium driven by playwright-core.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';
import { signInAsOperator } from './sign-in.js';

const clock = fakeClock('2025-03-14T09:00:00.000Z');
let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let page: Page;
let merchantId: number;
let endpointId: number;

const BIDI = ['\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u200e', '\u200f', '\u061c'];
const OTHER_INVISIBLE = ['\u0007', '\u001b', '\u007f', '\u0085', '\u200b', '\u2028', '\ufeff'];

beforeAll(async () => {
  service = await startTestService({
    now: clock.now,
    config: { webhooks: { allowHosts: ['127.0.0.1'], backoffSeconds: [60, 600, 3600] } },
  });
  receiver = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  merchantId = (await service.admin.createMerchant({ name: 'Mirror Outfitters' })).id;
  const endpoint = await service.service.endpoints.create(merchantId, { url: receiver.url });
  endpointId = endpoint.id;
  receiver.secret = endpoint.secret;
  browser = await launchBrowser();
  page = await browser.newPage();
  await signInAsOperator(page, service.url);
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

describe("a receiver's answer on the delivery page", () => {
  it('shows every bidirectional control and invisible character as a marked code point, the rest as sent', async () => {
    const answer = `refused: ${BIDI.map((c, i) => `b${i}${c}`).join('')} and ${OTHER_INVISIBLE.map((c, i) => `o${i}${c}`).join('')} fin`;
    receiver.answer({ status: 500, body: answer });
    const { id } = await service.service.endpoints.sendTest(merchantId, endpointId);
    await service.service.dispatcher.tick();
    const [attempt] = (await service.service.endpoints.delivery(merchantId, endpointId, id)).attempts;
    expect(attempt!.response_snippet).toBe(answer);

    await page.goto(`${service.url}/panel/merchants/${merchantId}/endpoints/${endpointId}/deliveries/${id}`);
    const snippet = page.locator('tr.attempt code.snippet').first();
    const shown = (await snippet.textContent())!;
    // Each character replaced by its code point, in place; nothing else changed.
    const expected = answer.replace(/[^ -~]/gu, (c) => `<U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}>`);
    expect(shown).toBe(expected);
    for (const char of [...BIDI, ...OTHER_INVISIBLE]) expect(shown).not.toContain(char);
    // Marked apart from the text: one element per character, saying what it is.
    const marks = snippet.locator('.code-point');
    expect(await marks.count()).toBe(BIDI.length + OTHER_INVISIBLE.length);
    expect(await marks.nth(4).textContent()).toBe('<U+202E>');
    expect(await marks.nth(4).getAttribute('title')).toMatch(/U\+202E: an invisible or direction-changing character/);
    expect(await marks.nth(4).evaluate((el) => getComputedStyle(el).borderStyle)).toBe('dashed');
    // Nothing after it is reversed: the text reads left to right, as the marks show it.
    expect(await snippet.evaluate((el) => (el as HTMLElement).innerText)).toBe(expected);
    await browser.screenshot(page, 'delivery-invisible-characters');
  });

  it('keeps well-formed text beyond ASCII, right-to-left scripts included, as it came', async () => {
    const answer = 'Zürich — שלום — مرحبا — 🏔';
    receiver.answer({ status: 500, body: answer });
    const { id } = await service.service.endpoints.sendTest(merchantId, endpointId);
    await service.service.dispatcher.tick();
    await page.goto(`${service.url}/panel/merchants/${merchantId}/endpoints/${endpointId}/deliveries/${id}`);
    const snippet = page.locator('tr.attempt code.snippet').first();
    expect(await snippet.textContent()).toBe(answer);
    expect(await snippet.locator('.code-point').count()).toBe(0);
  });
});
