// What the page's browser tests do alike (page.test.mjs, page-shell.test.mjs, page-jwt.test.mjs): open a page
// watched from the start, ask a question as a person types it, wait for the turn to end, open a section of the
// sidebar, watch what the page does and check that it stayed quiet.
import assert from 'node:assert/strict';

/** How long one step of a test may take, in milliseconds. */
export const STEP_TIMEOUT_MS = 60000;

/** Types `text` in the question box and presses Enter. */
export async function ask(page, text) {
  const box = await page.waitForSelector('#question:not([disabled])', { visible: true });
  await box.click();
  await box.type(text);
  await page.keyboard.press('Enter');
}

/** Waits until the page has finished the turn (the log is no longer busy and Stop is off again). */
export async function turnDone(page) {
  await page.waitForFunction(() => document.getElementById('log').getAttribute('aria-busy') === 'false'
    && document.getElementById('stop').disabled, { timeout: STEP_TIMEOUT_MS });
}

/** Opens the sidebar's section `name` (chats, usage, api-keys, documents): its tab, then the section shown. */
export async function showTab(page, name) {
  await page.click(`#tab-${name}`);
  await page.waitForSelector(`#${name}.active`, { visible: true });
}

/** What the page does on the network and in its console, recorded from now on. */
export function watch(page) {
  const seen = { failed: [], bad: [], console: [], pageErrors: [], calls: [] };
  page.on('pageerror', (e) => seen.pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && seen.console.push(`${m.text()} (${m.location()?.url ?? ''})`));
  page.on('requestfailed', (r) => seen.failed.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  page.on('request', (r) => seen.calls.push(`${r.method()} ${new URL(r.url()).pathname}`));
  page.on('response', (r) => {
    if (r.status() >= 400) seen.bad.push(`${r.request().method()} ${r.url()} -> ${r.status()}`);
  });
  return seen;
}

/** A new page of `browser` (or of a browser context), each step of it bounded by STEP_TIMEOUT_MS, and what `watch`
 * sees of it from the start. */
export async function watchedPage(browser) {
  const page = await browser.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  return { page, seen: watch(page) };
}

/** Asserts that what `watch` saw holds no failed request, no answer of 400 or above, no console or script error. */
export function assertQuiet(seen) {
  assert.deepEqual(seen.failed, [], 'failed requests');
  assert.deepEqual(seen.bad, [], 'answers of 400 and above');
  assert.deepEqual(seen.console, [], 'console errors');
  assert.deepEqual(seen.pageErrors, [], 'script errors');
}
