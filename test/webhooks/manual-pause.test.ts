// Pausing an endpoint by hand (admin `updateWebhookEndpoint` with `status: paused`, the panel's
// Pause button): nothing is sent, changes arriving meanwhile become dropped deliveries, and no
// cooldown or successful attempt ends it; re-enabling does.
import { afterEach, describe, expect, it } from 'vitest';
import { adminOk } from '../support/admin-http.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  await world?.close();
});

describe('an endpoint paused by hand', () => {
  it('sends nothing and records the changes as dropped deliveries until it is re-enabled', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver();
    const endpoint = await world.register(receiver, { events: ['content'] });
    const base = `${world.merchant.base}/webhook-endpoints/${endpoint.id}`;

    const paused = await adminOk(world.service, 'PATCH', base, { status: 'paused' });
    expect(paused).toMatchObject({ status: 'paused', paused_until: null });
    await world.putProduct('PAUSED-1');
    await world.after(2 * SECOND);
    // A day later, still paused: there is no cooldown to end.
    await world.after(24 * 3600 * SECOND);
    await world.putProduct('PAUSED-2');
    await world.after(2 * SECOND);
    expect(receiver.count).toBe(0);
    const deliveries = await adminOk(world.service, 'GET', `${base}/deliveries`);
    expect(deliveries.data.length).toBeGreaterThan(0);
    expect(deliveries.data.every((d: { status: string }) => d.status === 'dropped')).toBe(true);
    expect(await adminOk(world.service, 'GET', base)).toMatchObject({ status: 'paused' });

    expect(await adminOk(world.service, 'PATCH', base, { status: 'active' })).toMatchObject({ status: 'active' });
    await world.putProduct('RESUMED-1');
    await world.after(2 * SECOND);
    expect(receiver.count).toBe(1);
  });
});
