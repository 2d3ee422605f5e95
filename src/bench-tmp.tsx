/** @jsxImportSource hono/jsx */
import { loadConfig } from './config.js';
import { createService } from './service.js';
import { SuccessCharts } from './panel/success-chart.js';
const service = createService(loadConfig({}, { databasePath: '/tmp/qbench/s.db', demoOnEmpty: false }), {});
const stats = await service.endpoints.attemptStats(1, 1);
for (let i = 0; i < 50; i++) String(await (<SuccessCharts windows={stats} />).toString());
const t1 = process.hrtime.bigint();
for (let i = 0; i < 200; i++) String(await (<SuccessCharts windows={stats} />).toString());
console.log('avg render', Number(process.hrtime.bigint() - t1) / 1e6 / 200, 'ms');
await service.close();
