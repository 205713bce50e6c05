/**
 * Debian's Chromium, headless, driven by playwright-core (its own browser downloads are not used: `make test`
 * installs the chromium package). Each launch gets a new, empty profile, removed at close.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface Browser {
  page: Page;
  /** What the page logged and threw, for a failure's message. */
  console: string[];
  close(): Promise<void>;
}

export async function openBrowser(viewport = { width: 1280, height: 720 }): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'herald-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport });
  } catch (error) {
    rmSync(profile, { recursive: true, force: true });
    throw error;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  const console: string[] = [];
  page.on('console', (message) => console.push(`${message.type()}: ${message.text()}`));
  page.on('pageerror', (error) => console.push(`pageerror: ${error.message}`));
  return {
    page,
    console,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
