// Headless Chromium for the browser tests, launched one way for all of them: from @sparticuz/chromium, extracted
// into tests/browser/.chromium (git-ignored) rather than the shared temporary folder, with the web's security model
// kept (no --disable-web-security, no single process), so CORS and the page's Content-Security-Policy apply as in
// any browser.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import chromium from '@sparticuz/chromium';
import puppeteer from 'puppeteer-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** A browser whose pages start at `viewport` ({width, height}), speaking en-US. */
export async function launchChromium(viewport) {
  // @sparticuz/chromium extracts into os.tmpdir().
  const dir = path.join(HERE, '.chromium');
  fs.mkdirSync(dir, { recursive: true });
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  let executablePath;
  try {
    executablePath = await chromium.executablePath();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
  const drop = new Set(['--disable-web-security', '--allow-running-insecure-content', '--single-process']);
  const args = chromium.args.filter((a) => !drop.has(a) && !a.startsWith('--headless'));
  return puppeteer.launch({
    executablePath,
    headless: 'shell',
    args: [...args, '--lang=en-US'], // puppeteer adds its defaults
    defaultViewport: viewport,
  });
}
