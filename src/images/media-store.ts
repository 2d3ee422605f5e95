// Storage of mirrored images: content-addressed (sha-256 of the bytes), so a copy's URL never
// changes meaning and can be cached forever. A local folder by default; object storage implements
// the same interface.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/** Image types the mirror accepts, by Content-Type, with the extension of their media key. SVG is refused (scripts). */
export const IMAGE_TYPES: Record<string, string> = {
  'image/jpeg': 'jpg',
  'image/png': 'png',
  'image/gif': 'gif',
  'image/webp': 'webp',
  'image/avif': 'avif',
};

export const CONTENT_TYPE_OF: Record<string, string> = Object.fromEntries(Object.entries(IMAGE_TYPES).map(([type, ext]) => [ext, type]));

/** `{sha256 hex}.{ext}`: the only names a media store holds. */
export const MEDIA_KEY = /^([0-9a-f]{64})\.(jpg|png|gif|webp|avif)$/;

export interface MediaStore {
  /** Stores the bytes under the key (idempotent: the key is their hash). */
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** The bytes under the key, or undefined. */
  get(key: string): Promise<Buffer | undefined>;
}

export class LocalFolderMediaStore implements MediaStore {
  /** Sub-folders made (or found) by this store: one mkdir each, not one per copy. */
  private readonly folders = new Set<string>();

  constructor(private readonly folder: string) {}

  private file(key: string): string {
    if (!MEDIA_KEY.test(key)) throw new RangeError(`not a media key: ${key}`);
    return path.join(this.folder, key.slice(0, 2), key);
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const file = this.file(key);
    const folder = path.dirname(file);
    if (!this.folders.has(folder)) {
      await fs.mkdir(folder, { recursive: true });
      this.folders.add(folder);
    }
    // Write then rename: a reader never sees a half-written copy. The temporary name is unique per
    // put, since two sources with the same bytes can be stored at once (same key, same process).
    const temporary = `${file}.${process.pid}.${randomUUID()}.tmp`;
    try {
      await fs.writeFile(temporary, bytes);
    } catch (error) {
      // The folder was removed meanwhile (an operator cleaning up): made again once.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      await fs.mkdir(folder, { recursive: true });
      await fs.writeFile(temporary, bytes);
    }
    await fs.rename(temporary, file);
  }

  async get(key: string): Promise<Buffer | undefined> {
    try {
      return await fs.readFile(this.file(key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }
}
