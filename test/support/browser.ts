// A real Chromium for the panel's browser tests, driven by playwright-core: the
// system's /usr/bin/chromium when it is installed, otherwise the binary that @sparticuz/chromium
// ships inside its npm package, so `npm ci` is all a machine needs. One browser per test file
// (launchBrowser in beforeAll, close in afterAll); screenshots go to artifacts/ (git-ignored).
//
//   let browser: TestBrowser;
//   beforeAll(async () => { browser = await launchBrowser(); });
//   afterAll(() => browser?.close());
//   it('…', async () => { const page = await browser.newPage(); …; await browser.screenshot(page, 'login'); });
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium as playwright, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';

const SYSTEM_CHROMIUM = '/usr/bin/chromium';
/** The repository's artifacts/ folder (ignored by git): each test's screenshots land under it. */
export const ARTIFACTS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'artifacts', 'panel');

// Quiet and hermetic: the tests reach 127.0.0.1 only, and nothing may phone home.
const QUIET_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export interface TestBrowser {
  browser: Browser;
  /** Which Chromium runs (for failure messages). */
  executablePath: string;
  /** A page in a fresh context: its own cookies, so each principal signs in separately (and its own time zone, locale…). */
  newPage(options?: BrowserContextOptions): Promise<Page>;
  /** Saves a full-page screenshot as artifacts/panel/<name>.png. */
  screenshot(page: Page, name: string): Promise<string>;
  close(): Promise<void>;
}

const UNSAFE_ARGS = [
  '--single-process',
  '--disable-web-security',
  '--disable-site-isolation-trials',
  '--allow-running-insecure-content',
  '--disable-features=AudioServiceOutOfProcess,IsolateOrigins,site-per-process',
];

async function chromiumToLaunch(): Promise<{ executablePath: string; args: string[] }> {
  if (fs.existsSync(SYSTEM_CHROMIUM)) return { executablePath: SYSTEM_CHROMIUM, args: QUIET_ARGS };
  // Imported only when needed: it unpacks its binary to /tmp on first use.
  const { default: packaged } = await import('@sparticuz/chromium');
  // Not the package's own serverless args: they turn off the same-origin policy and site isolation
  // (--disable-web-security, --single-process, ...), which the panel's security tests rely on.
  const safe = packaged.args.filter((arg) => !UNSAFE_ARGS.some((unsafe) => arg.startsWith(unsafe)));
  return { executablePath: await packaged.executablePath(), args: [...safe, ...QUIET_ARGS] };
}

/**
 * Launches Chromium or throws an error that says why (no binary, a missing shared library…).
 * The error is never turned into a skip: with CI=true a panel test without a browser fails loudly.
 */
export async function launchBrowser(): Promise<TestBrowser> {
  let executablePath = '(not found)';
  let browser: Browser;
  try {
    const target = await chromiumToLaunch();
    executablePath = target.executablePath;
    browser = await playwright.launch({ executablePath, args: target.args, headless: true, timeout: 30_000 });
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(
      `The panel's browser tests need Chromium and none could start (${process.env.CI ? 'CI=true: this is a failure, not a skip' : 'local run'}).\n` +
        `Tried: ${fs.existsSync(SYSTEM_CHROMIUM) ? SYSTEM_CHROMIUM : `@sparticuz/chromium (${executablePath}), since ${SYSTEM_CHROMIUM} does not exist`}.\n` +
        `Install it with \`apt-get install chromium\` or reinstall the dev dependencies with \`npm ci\`.\nCause: ${why}`,
      { cause: error },
    );
  }
  fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
  const contexts: BrowserContext[] = [];
  return {
    browser,
    executablePath,
    async newPage(options) {
      const context = await browser.newContext(options);
      contexts.push(context);
      return context.newPage();
    },
    async screenshot(page, name) {
      const file = path.join(ARTIFACTS_DIR, `${name.replace(/[^A-Za-z0-9_.-]+/g, '-')}.png`);
      await page.screenshot({ path: file, fullPage: true });
      return file;
    },
    async close() {
      await Promise.all(contexts.map((c) => c.close().catch(() => undefined)));
      await browser.close();
    },
  };
}
