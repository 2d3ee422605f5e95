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

/** Browser-less: the operator's session cookie (`name=value`) from the sign-in form, over HTTP. */
export async function operatorCookie(serviceUrl: string): Promise<string> {
  const response = await fetch(`${serviceUrl}/panel/login/operator`, {
    method: 'POST',
    redirect: 'manual',
    headers: { Origin: serviceUrl, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ admin_token: ADMIN_TOKEN }),
  });
  return response.headers.get('set-cookie')!.split(';')[0]!;
}
