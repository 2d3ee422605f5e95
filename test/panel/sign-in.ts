// Signing in to the panel in a browser page, as the tests' principals do.
import type { Page } from 'playwright-core';
import { ADMIN_TOKEN } from '../support/service.js';

/** The operator signs in with the admin token and lands on /panel. */
export async function signInAsOperator(page: Page, serviceUrl: string): Promise<void> {
  await page.goto(`${serviceUrl}/panel/login`);
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in as operator' }).click();
  await page.waitForURL(`${serviceUrl}/panel`);
}
