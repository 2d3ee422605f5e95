// The panel's accounts on PostgreSQL: sql/panel.ts, with the sign-in throttle's subjects locked
// while a transaction counts and records their failures.
import { SqlPanel } from '../sql/panel.js';

/** The class key of the sign-in subjects' advisory locks (any fixed integer: "cpss"). */
const SIGN_IN_SUBJECT_LOCK = 0x63707373;

export class PgPanel extends SqlPanel {
  override async countSignInFailures(
    subjects: string[],
    since: string,
  ): Promise<Map<string, { count: number; oldest: string; newest: string }>> {
    // A lock per subject (held to the transaction's end, taken in one order so two attempts never
    // deadlock), then the count in a statement of its own: READ COMMITTED gives it a snapshot taken
    // after the lock, which sees every failure the previous holder committed.
    if (this.c.locksRows && subjects.length > 0) {
      await this.c.run(
        `SELECT pg_advisory_xact_lock(${SIGN_IN_SUBJECT_LOCK}, s.key)
        FROM (SELECT DISTINCT hashtext(value) AS key FROM unnest($1::text[]) AS u(value) ORDER BY 1) AS s`,
        [subjects],
      );
    }
    return super.countSignInFailures(subjects, since);
  }
}
