// The panel's stylesheet and script, served from the package itself (no CDN, no bundler). They are
// read once at start from src/panel/assets/ (the build copies them beside the compiled code).
import fs from 'node:fs';
import { Hono } from 'hono';

const read = (name: string) => fs.readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');

export function panelAssets(): Hono {
  const files: Record<string, { body: string; type: string }> = {
    'panel.css': { body: read('panel.css'), type: 'text/css; charset=utf-8' },
    'panel.js': { body: read('panel.js'), type: 'text/javascript; charset=utf-8' },
    'local-time.js': { body: read('local-time.js'), type: 'text/javascript; charset=utf-8' },
  };
  const assets = new Hono();
  assets.get('/:name', (c) => {
    const file = files[c.req.param('name')];
    if (!file) return c.notFound();
    return c.body(file.body, 200, { 'Content-Type': file.type, 'Cache-Control': 'public, max-age=300' });
  });
  return assets;
}
