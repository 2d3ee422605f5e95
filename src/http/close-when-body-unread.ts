// A response sent before the request body was read to its end (a bad token, 413, a bad path
// parameter, a refused panel form) closes the connection: @hono/node-server would otherwise stall
// draining the unread body and reset the connection 500 ms later, failing the client's next request
// on it.
//
//   app.use('/admin/v1/*', closeWhenBodyUnread);
import type { IncomingMessage } from 'node:http';
import type { MiddlewareHandler } from 'hono';

export const closeWhenBodyUnread: MiddlewareHandler = async (c, next) => {
  await next();
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const hasBody = Number(c.req.header('Content-Length') ?? 0) > 0 || c.req.header('Transfer-Encoding') !== undefined;
  if (incoming && hasBody && !incoming.readableEnded) c.res.headers.set('Connection', 'close');
};
