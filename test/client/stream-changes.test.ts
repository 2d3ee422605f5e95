// streamChanges over real HTTP in Node: the windows of the stream from a cursor, the error answers
// it throws (not retried: a key the service refuses stays refused), and its signal. The browser
// side, the reconnect after a cut connection and CORS: test/http/browser-feed.test.ts (Chromium).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogApiError, createCatalogClient, pollChanges, streamChanges } from '../../src/client/index.js';
import { buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
});

afterAll(async () => {
  await service?.close();
});

describe('streamChanges', () => {
  it('yields the windows a poll would, each with the cursor after it, from the cursor given', async () => {
    const client = createCatalogClient({ baseUrl: service.url, apiKey: catalog.merchant.key });
    const polled = [];
    for await (const window of pollChanges(client, { store: 'de' })) polled.push(window);
    const stop = new AbortController();
    const streamed = [];
    for await (const window of streamChanges(client, { store: 'de', signal: stop.signal })) {
      streamed.push(window);
      if (streamed.flatMap((w) => w.changes).length === polled.flatMap((w) => w.changes).length) break;
    }
    expect(streamed.flatMap((w) => w.changes)).toEqual(polled.flatMap((w) => w.changes));
    expect(streamed.at(-1)!.cursor).toEqual(polled.at(-1)!.cursor);
    // From that cursor nothing follows yet: an abort ends the wait with the signal's reason.
    const quiet = new AbortController();
    const waiting = streamChanges(client, { store: 'de', cursor: polled.at(-1)!.cursor, signal: quiet.signal }).next();
    setTimeout(() => quiet.abort(), 200);
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('throws the error answer as CatalogApiError, without retrying it: an unknown key, an unknown store', async () => {
    const unknown = createCatalogClient({ baseUrl: service.url, apiKey: `cps_${'x'.repeat(43)}` });
    const refused = await streamChanges(unknown, { store: 'de' })
      .next()
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CatalogApiError);
    expect(refused).toMatchObject({ status: 401, problem: { code: 'unauthorized' } });
    const client = createCatalogClient({ baseUrl: service.url, apiKey: catalog.merchant.key });
    const noStore = await streamChanges(client, { store: 'nope' })
      .next()
      .catch((error: unknown) => error);
    expect(noStore).toMatchObject({ status: 404, problem: { code: 'store_not_found' } });
  });
});
