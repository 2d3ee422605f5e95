// Owners' notifications (spec 3: "the merchant's account owners are notified"): always written to
// the notifications table an operator can read, and e-mailed when SMTP is configured.
import nodemailer, { type Transporter } from 'nodemailer';
import { silentLogger, type Logger } from '../operations/log.js';
import type { CatalogStorage, StorageTx } from '../storage/port.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { NotificationRecord, WebhookEndpointRecord } from './model.js';

export type { NotificationKind } from './model.js';
import type { NotificationKind } from './model.js';

export interface Notifier {
  /** Records the notification in the caller's transaction (tx). */
  notify(tx: StorageTx, endpoint: WebhookEndpointRecord, kind: NotificationKind): Promise<NotificationRecord>;
  /** E-mails a recorded notification to the merchant's owners, once its transaction committed (in the background). */
  email(notification: NotificationRecord): void;
  /** Waits for e-mails still being sent. */
  flush(): Promise<void>;
}

function message(endpoint: WebhookEndpointRecord, kind: NotificationKind): { subject: string; body: string } {
  const where = `webhook endpoint #${endpoint.id} (${endpoint.url})`;
  switch (kind) {
    case 'failing':
      return {
        subject: `Webhook deliveries to ${endpoint.url} are failing`,
        body:
          `The last ${endpoint.consecutive_failures} delivery attempts to ${where} failed (last failure at ${endpoint.last_failure_at}). ` +
          'Deliveries are retried with backoff; if failures continue the endpoint will be paused. ' +
          'Changes stay available from the change feed (GET /v1/changes).',
      };
    case 'paused':
      return {
        subject: `Webhook endpoint ${endpoint.url} is paused`,
        body:
          `After ${endpoint.consecutive_failures} consecutive failed attempts, ${where} is paused until ${endpoint.paused_until}. ` +
          'Nothing is sent while paused and pending retries were dropped; the next change after the cooldown resumes deliveries. ' +
          'Catch up on missed changes from the change feed (GET /v1/changes).',
      };
    case 'disabled':
      return {
        subject: `Webhook endpoint ${endpoint.url} was disabled`,
        body:
          `${where} answered 410 Gone, so it was disabled and pending deliveries were dropped. ` +
          'Enable it again once the receiver is back: "Enable" on its page in the panel, or through the admin API.',
      };
  }
}

export class OwnerNotifier implements Notifier {
  private readonly transport: Transporter | null;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly storage: CatalogStorage,
    private readonly smtp: { url: string | null; from: string },
    private readonly now: () => Date,
    private readonly logger: Logger = silentLogger,
  ) {
    this.transport = smtp.url ? nodemailer.createTransport(smtp.url) : null;
  }

  /** Writes the notification for the endpoint's merchant (through its scope), in the transaction of what caused it. */
  async notify(tx: StorageTx, endpoint: WebhookEndpointRecord, kind: NotificationKind): Promise<NotificationRecord> {
    const { subject, body } = message(endpoint, kind);
    const notification = await scopeToMerchant(tx, endpoint.merchant_id).insertNotification({
      endpoint_id: endpoint.id,
      kind,
      subject,
      body,
      created_at: this.now().toISOString(),
    });
    return notification;
  }

  email(notification: NotificationRecord): void {
    const transport = this.transport;
    if (!transport) return;
    const sending = scopeToMerchant(this.storage, notification.merchant_id)
      .getMerchant()
      .then(async (merchant) => {
        const owners = merchant?.owner_emails ?? [];
        if (owners.length === 0) return;
        await transport.sendMail({ from: this.smtp.from, to: owners, subject: notification.subject, text: notification.body });
        await this.storage.markNotificationEmailed(notification.id, this.now().toISOString());
      })
      .catch((error: unknown) => this.logger.error({ err: error, notification_id: notification.id }, 'e-mailing a notification failed'))
      .finally(() => this.pending.delete(sending));
    this.pending.add(sending);
  }

  async flush(): Promise<void> {
    await Promise.all(this.pending);
  }
}
