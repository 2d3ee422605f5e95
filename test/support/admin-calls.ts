// The admin API of a service started in a child process, called over HTTP with the operator's token:
// a non-2xx answer throws with its status and body; a 204 gives undefined, anything else its JSON.

/** Calls `${root}${pathname}` (root: the service's address, or it and `/admin/v1`). */
export function adminCalls(root: string, token: string) {
  return async (method: string, pathname: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${root}${pathname}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${await response.text()}`);
    return response.status === 204 ? undefined : response.json();
  };
}
