// The descriptor limit as read from /proc/self/limits, and the connection cap computed below it
// (CPS_MAX_CONNECTIONS, CPS_DESCRIPTOR_RESERVE).
import { describe, expect, it } from 'vitest';
import { ASSUMED_DESCRIPTOR_LIMIT, connectionLimits, parseOpenFilesLimit, readDescriptorLimit } from '../../src/operations/descriptors.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max stack size            8388608              unlimited            bytes     
Max processes             96365                96365                processes 
Max open files            300                  524288               files     
Max locked memory         8388608              8388608              bytes     
`;

describe('the descriptor limit', () => {
  it('is the soft limit of "Max open files", not the hard one', () => {
    expect(parseOpenFilesLimit(LIMITS)).toBe(300);
  });

  it('is unknown when the line is missing or says unlimited', () => {
    expect(parseOpenFilesLimit('Limit Soft Limit Hard Limit Units\nMax processes 10 10 processes\n')).toBeUndefined();
    expect(parseOpenFilesLimit(LIMITS.replace('300                  524288', 'unlimited            unlimited'))).toBeUndefined();
  });

  it('is unknown where /proc/self/limits cannot be read', () => {
    expect(
      readDescriptorLimit(() => {
        throw new Error('ENOENT: no such file or directory');
      }),
    ).toBeUndefined();
  });

  it("is this process's own on Linux", () => {
    if (process.platform !== 'linux') return;
    expect(readDescriptorLimit()).toBeGreaterThan(0);
  });
});

describe('the connection cap', () => {
  it('is the limit minus the reserve by default, with a quarter of the reserve for the answers past it', () => {
    expect(connectionLimits({ descriptorLimit: 300, descriptorReserve: 128, maxConnections: null })).toEqual({
      descriptorLimit: 300,
      descriptorReserve: 128,
      maxConnections: 172,
      overflowConnections: 32,
    });
  });

  it('is CPS_MAX_CONNECTIONS when set', () => {
    expect(connectionLimits({ descriptorLimit: 300, descriptorReserve: 128, maxConnections: 50 })).toMatchObject({ maxConnections: 50 });
  });

  it('assumes a limit of 1024 when the limit could not be read', () => {
    expect(connectionLimits({ descriptorLimit: undefined, descriptorReserve: 100, maxConnections: null })).toMatchObject({
      descriptorLimit: null,
      maxConnections: ASSUMED_DESCRIPTOR_LIMIT - 100,
    });
  });

  it('refuses to start when the reserve leaves no connection, naming the settings', () => {
    expect(() => connectionLimits({ descriptorLimit: 100, descriptorReserve: 128, maxConnections: null })).toThrow(
      /file descriptor limit \(100\) leaves no connections after CPS_DESCRIPTOR_RESERVE \(128\)/,
    );
  });
});
