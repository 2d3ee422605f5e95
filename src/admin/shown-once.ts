// Secrets shown once in the panel: a POST that makes one (a new API key, a signing
// secret, an invitation or reset link) keeps it here and redirects; the GET it redirects to takes it,
// and a reload or a second view finds nothing, so no reload repeats the change and no URL carries a
// secret. A message belongs to one session (a second session asking for its id finds nothing) and is
// sealed (AES-256-GCM) with a key derived from that session's cookie token, which the database never
// holds: the rows alone reveal nothing. Unread messages expire after `shownOnceMinutes`.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import type { PanelStore } from '../storage/port.js';

const IV_BYTES = 12;
const TAG_BYTES = 16;

const sessionHash = (sessionToken: string) => createHash('sha256').update(sessionToken).digest();
const keyOf = (sessionToken: string) => createHmac('sha256', sessionToken).update('cps panel shown-once v1').digest();

function seal(sessionToken: string, message: unknown): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyOf(sessionToken), iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(message), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

function open(sessionToken: string, sealed: Buffer): unknown {
  const decipher = createDecipheriv('aes-256-gcm', keyOf(sessionToken), sealed.subarray(0, IV_BYTES));
  decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return JSON.parse(Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8'));
}

export class ShownOnceMessages {
  constructor(
    private readonly storage: Pick<PanelStore, 'insertPanelFlash' | 'takePanelFlash' | 'deleteExpiredPanelFlashes'>,
    private readonly minutes: () => number,
    private readonly now: () => Date,
  ) {}

  /** Keeps the message for the session; the id the page that shows it takes it by. */
  async keep(sessionToken: string, message: unknown): Promise<number> {
    const now = this.now();
    // Messages nobody came to read are dropped as new ones arrive (an index range, usually empty).
    await this.storage.deleteExpiredPanelFlashes(now.toISOString());
    const expiresAt = new Date(now.getTime() + this.minutes() * 60_000).toISOString();
    return this.storage.insertPanelFlash(sessionHash(sessionToken), seal(sessionToken, message), expiresAt);
  }

  /** The message, once: undefined when already taken, expired, or another session's. */
  async take(sessionToken: string, id: number): Promise<unknown> {
    const taken = await this.storage.takePanelFlash(sessionHash(sessionToken), id);
    if (!taken || this.now().getTime() >= Date.parse(taken.expires_at)) return undefined;
    return open(sessionToken, Buffer.from(taken.sealed));
  }
}
