// Owners' notifications: always in the notifications table, and e-mailed to the merchant's owner
// addresses when SMTP is configured — here to a real SMTP server on 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import { startTestService, type TestService } from '../support/service.js';
import { startSmtpCapture, type Mail, type SmtpCapture } from '../support/smtp.js';

let service: TestService;
let smtp: SmtpCapture;
let port: number;
let mails: Mail[];

beforeAll(async () => {
  service = await startTestService();
  smtp = await startSmtpCapture();
  ({ port, mails } = smtp);
});
afterAll(async () => {
  await smtp.close();
  await service.close();
});

describe("owners' notifications", () => {
  it('records the notification and e-mails every owner when SMTP is configured', async () => {
    const merchant = await service.admin.createMerchant({ name: 'Mail merchant', owner_emails: ['ops@shop.test', 'cto@shop.test'] });
    const endpoint = await service.storage.createWebhookEndpoint({
      merchant_id: merchant.id,
      url: 'https://shop.test/hooks',
      store_id: null,
      events: ['price'],
      secret: 'whsec_x',
      created_at: new Date().toISOString(),
    });
    const notifier = new OwnerNotifier(
      service.storage,
      { url: `smtp://127.0.0.1:${port}`, from: 'catalog@service.test' },
      () => new Date(),
    );
    // Recorded in the caller's transaction, e-mailed once it committed (as the dispatcher does).
    const notification = await service.storage.transaction((tx) =>
      notifier.notify(tx, { ...endpoint, consecutive_failures: 5, last_failure_at: new Date().toISOString() }, 'failing'),
    );
    notifier.email(notification);
    await notifier.flush();
    expect(mails).toHaveLength(1);
    expect(mails[0]!.from).toBe('catalog@service.test');
    expect(mails[0]!.to.sort()).toEqual(['cto@shop.test', 'ops@shop.test']);
    expect(mails[0]!.data).toContain(`Subject: ${notification.subject}`);
    const [stored] = await service.storage.listNotifications(merchant.id, 10);
    expect(stored).toMatchObject({ id: notification.id, kind: 'failing', endpoint_id: endpoint.id });
    expect(stored!.emailed_at).not.toBeNull();
  });

  it('records the notification without e-mail when SMTP is not configured', async () => {
    const merchant = await service.admin.createMerchant({ name: 'No mail merchant', owner_emails: ['ops@quiet.test'] });
    const endpoint = await service.storage.createWebhookEndpoint({
      merchant_id: merchant.id,
      url: 'https://quiet.test/hooks',
      store_id: null,
      events: ['price'],
      secret: 'whsec_y',
      created_at: new Date().toISOString(),
    });
    const before = mails.length;
    const notifier = new OwnerNotifier(service.storage, { url: null, from: 'catalog@service.test' }, () => new Date());
    const notification = await service.storage.transaction((tx) =>
      notifier.notify(tx, { ...endpoint, paused_until: new Date().toISOString() }, 'paused'),
    );
    notifier.email(notification);
    await notifier.flush();
    expect(mails).toHaveLength(before);
    const [stored] = await service.storage.listNotifications(merchant.id, 10);
    expect(stored).toMatchObject({ kind: 'paused', emailed_at: null });
  });
});
