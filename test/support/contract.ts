// The contract harness: every response a test receives is validated against the bundled,
// authored document (Ajv, JSON Schema 2020-12), so no test can pass on a response that breaks
// the contract. An undocumented operation, status or content type fails as loudly as a bad body.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import adminDocument from '../../src/generated/admin-openapi.json' with { type: 'json' };
import operationsDocument from '../../src/generated/operations-openapi.json' with { type: 'json' };
import publicDocument from '../../src/generated/public-openapi.json' with { type: 'json' };

type Json = Record<string, any>;

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export class ContractViolation extends Error {}

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  operation: Json;
}

export class Contract {
  private readonly ajv: Ajv2020;
  private readonly operations: Operation[];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(
    readonly name: string,
    readonly doc: Json,
  ) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addSchema(doc, name);
    this.operations = [];
    for (const [template, item] of Object.entries(doc.paths as Json)) {
      const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      for (const method of ['get', 'put', 'post', 'patch', 'delete']) {
        if (item[method]) this.operations.push({ method, template, pattern, operation: item[method] });
      }
    }
  }

  /** The documented operation a request path and method hit, if any: a path without templates before templated ones (`/v1/products/export` before `/v1/products/{id}`, as OpenAPI matches them). */
  operationFor(method: string, path: string): Operation | undefined {
    const matching = this.operations.filter((o) => o.method === method.toLowerCase() && o.pattern.test(path));
    return matching.find((o) => !o.template.includes('{')) ?? matching[0];
  }

  private resolve(value: Json): Json {
    let current = value;
    while (current?.$ref) {
      const pointer = (current.$ref as string).replace(/^#\//, '').split('/');
      current = pointer.reduce((node: Json, key) => node[decodeURIComponent(key.replace(/~1/g, '/').replace(/~0/g, '~'))], this.doc);
    }
    return current;
  }

  /** Validates one JSON value against a schema given as a JSON pointer into the document. */
  validateSchema(pointer: string, value: unknown): void {
    let validate = this.compiled.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${this.name}#${pointer}` });
      this.compiled.set(pointer, validate);
    }
    if (!validate(value)) {
      throw new ContractViolation(`${pointer}: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`);
    }
  }

  /** Throws ContractViolation unless the response is one the document allows for this request. */
  validateResponse(method: string, url: string, status: number, headers: Headers, body: string): void {
    const path = new URL(url, 'http://x').pathname;
    const found = this.operationFor(method, path);
    const where = `${method.toUpperCase()} ${path} -> ${status}`;
    if (!found) throw new ContractViolation(`${where}: no such operation in ${this.name}`);
    const responses = found.operation.responses as Json;
    const declared = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
    if (!declared) throw new ContractViolation(`${where}: status not documented for ${found.operation.operationId}`);
    const response = this.resolve(declared);
    for (const [name, header] of Object.entries((response.headers ?? {}) as Json)) {
      const spec = this.resolve(header);
      const value = headers.get(name);
      if (spec.required && value === null) throw new ContractViolation(`${where}: missing header ${name}`);
      if (value !== null && spec.schema) {
        const schema = this.resolve(spec.schema);
        // Header values are text; an integer header (Content-Length) is checked as the number it spells.
        const typed =
          (schema.type === 'integer' || schema.type === 'number') && /^-?[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : value;
        const validate = this.ajv.compile(schema);
        if (!validate(typed)) throw new ContractViolation(`${where}: header ${name}: "${value}" ${this.ajv.errorsText(validate.errors)}`);
      }
    }
    if (!response.content) {
      if (body.length > 0) throw new ContractViolation(`${where}: body where none is documented`);
      return;
    }
    const contentType = (headers.get('content-type') ?? '').split(';')[0]!.trim();
    const media = (response.content as Json)[contentType];
    if (!media)
      throw new ContractViolation(`${where}: content type "${contentType}" not documented (${Object.keys(response.content).join(', ')})`);
    // NDJSON (exportProducts): a string whose every line, each ending in a newline, is a value of
    // its contentSchema (the schema of one line: OpenAPI 3.2's itemSchema).
    if (contentType === 'application/x-ndjson') {
      if (body.length > 0 && !body.endsWith('\n')) throw new ContractViolation(`${where}: NDJSON body does not end with a newline`);
      const schemaRef = media.schema?.contentSchema?.$ref as string | undefined;
      if (media.schema?.type !== 'string' || !schemaRef)
        throw new ContractViolation(`${where}: NDJSON is documented without a line schema (contentSchema)`);
      for (const [index, line] of body.split('\n').slice(0, -1).entries()) {
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          throw new ContractViolation(`${where}: line ${index + 1} is not JSON: ${line.slice(0, 200)}`);
        }
        this.validateSchema(schemaRef.slice(1), value);
      }
      return;
    }
    // Binary bodies (getMedia's image/*) and text (getMetrics): the status, the content type and
    // the headers are what the document states; the bytes themselves are the tests' to compare.
    if (!/^application\/([a-z0-9.+-]+\+)?json$/.test(contentType)) {
      const documentedAs = contentType.startsWith('text/') ? media.schema?.type === 'string' : media.schema?.format === 'binary';
      if (!documentedAs) throw new ContractViolation(`${where}: ${contentType} is documented without a binary or string schema`);
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      throw new ContractViolation(`${where}: body is not JSON: ${body.slice(0, 200)}`);
    }
    const schemaRef = media.schema?.$ref as string | undefined;
    if (schemaRef) {
      this.validateSchema(schemaRef.slice(1), json);
    } else {
      const validate = this.ajv.compile({ $ref: `${this.name}#${pointerTo(this.doc, media.schema)}` });
      if (!validate(json)) throw new ContractViolation(`${where}: ${this.ajv.errorsText(validate.errors)}`);
    }
  }
}

function pointerTo(root: Json, target: unknown, path = ''): string {
  if (root === target) return path;
  if (root && typeof root === 'object') {
    for (const [key, value] of Object.entries(root)) {
      const found = pointerTo(value as Json, target, `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`);
      if (found) return found;
    }
  }
  return '';
}

export const publicContract = new Contract('public', publicDocument);
export const adminContract = new Contract('admin', adminDocument);
export const operationsContract = new Contract('operations', operationsDocument);

/** The contract of whichever document owns the path. */
export function contractFor(url: string): Contract {
  const path = new URL(url, 'http://x').pathname;
  if (path.startsWith('/admin/')) return adminContract;
  return operationsContract.operationFor('GET', path) ? operationsContract : publicContract;
}

/** A fetch that validates every response against the contract before handing it back. */
export function contractFetch(base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await base(request);
    const body = await response.clone().text();
    contractFor(request.url).validateResponse(request.method, request.url, response.status, response.headers, body);
    return response;
  };
}
