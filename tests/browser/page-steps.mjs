// What the page's browser tests do alike (page.test.mjs, page-shell.test.mjs): ask a question as a person types it,
// wait for the turn to end, open a section of the sidebar.

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
