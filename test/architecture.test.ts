// The layers' dependency rules, read from the imports of every file under src/: dependencies point
// down (http and panel -> the domain -> storage; shared/ and generated/ below them all), the domain
// defines its own types in type-only model files that storage may import as types, and every
// operation of the storage port keyed by a merchant is bound in a merchant's scope.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { MERCHANT_IN_ROW, MERCHANT_KEYED, STORE_KEYED } from '../src/storage/merchant-scope.js';

const SRC = resolve(import.meta.dirname, '../src');
/** The domain's modules: what the service does, in the spec's words. */
const DOMAIN = ['catalog', 'changes', 'webhooks', 'images', 'admin', 'tenancy'];
/** The layers above the domain: they call it. */
const ABOVE = ['http', 'panel', 'cli.ts', 'server.ts', 'service.ts'];
/** The domain's type-only model files, the one part of the domain storage may import (as types). */
const MODEL_FILES = /^(catalog|changes|tenancy|webhooks|admin)\/model\.ts$/;

interface Import {
  /** The importing file, relative to src/ (`catalog/stores.ts`). */
  from: string;
  /** What it imports, relative to src/ (`storage/port.ts`), or the package's name. */
  to: string;
  /** A file of src/ (else a package). */
  internal: boolean;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(
    file,
    text,
    ts.ScriptTarget.Latest,
    false,
    file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
  );
  const from = relative(SRC, file);
  const found: Import[] = [];
  const add = (specifier: string, typeOnly: boolean) => {
    const internal = specifier.startsWith('.');
    const to = internal
      ? relative(SRC, resolve(dirname(file), specifier)).replace(/\.js$/, existsAsTsx(file, specifier) ? '.tsx' : '.ts')
      : specifier;
    found.push({ from, to, internal, typeOnly });
  };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        !!clause &&
        (clause.isTypeOnly ||
          (!clause.name &&
            !!clause.namedBindings &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      add(node.moduleSpecifier.text, typeOnly);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text, false);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function existsAsTsx(file: string, specifier: string): boolean {
  try {
    readFileSync(resolve(dirname(file), specifier.replace(/\.js$/, '.tsx')));
    return true;
  } catch {
    return false;
  }
}

const IMPORTS = sourceFiles(SRC).flatMap(importsOf);
const inside = (path: string, areas: string[]) => areas.some((area) => path === area || path.startsWith(`${area}/`));
const insideSrc = (i: Import, areas: string[]) => i.internal && inside(i.to, areas);
const describeImport = ({ from, to, typeOnly }: Import) => `${from} -> ${to}${typeOnly ? ' (type)' : ''}`;

describe('the layers of src/', () => {
  it('reads the imports of every file (a rule over no imports would pass vacuously)', () => {
    expect(IMPORTS.filter((i) => i.from.startsWith('storage/')).length).toBeGreaterThan(50);
    expect(IMPORTS.filter((i) => inside(i.from, ['http', 'panel'])).length).toBeGreaterThan(50);
  });

  it('storage imports no module of the domain, only the types of its model files, and nothing above the domain', () => {
    const wrong = IMPORTS.filter(
      (i) => i.from.startsWith('storage/') && (insideSrc(i, ABOVE) || (insideSrc(i, DOMAIN) && !(MODEL_FILES.test(i.to) && i.typeOnly))),
    );
    expect(wrong.map(describeImport)).toEqual([]);
  });

  it('http and panel call the domain, never storage', () => {
    const wrong = IMPORTS.filter((i) => inside(i.from, ['http', 'panel']) && insideSrc(i, ['storage']));
    expect(wrong.map(describeImport)).toEqual([]);
  });

  it('the domain imports nothing above it (http, panel, the command line, the service assembly)', () => {
    const wrong = IMPORTS.filter((i) => inside(i.from, DOMAIN) && insideSrc(i, ABOVE));
    expect(wrong.map(describeImport)).toEqual([]);
  });

  it('shared/ imports no domain module, no storage and nothing above', () => {
    const wrong = IMPORTS.filter(
      (i) => i.from.startsWith('shared/') && insideSrc(i, [...DOMAIN, ...ABOVE, 'storage', 'operations', 'outbound']),
    );
    expect(wrong.map(describeImport)).toEqual([]);
  });

  it('generated/ is imported, and imports nothing of src/ but itself', () => {
    const wrong = IMPORTS.filter((i) => i.from.startsWith('generated/') && i.internal && !i.to.startsWith('generated/'));
    expect(wrong.map(describeImport)).toEqual([]);
    expect(IMPORTS.some((i) => !i.from.startsWith('generated/') && i.to.startsWith('generated/'))).toBe(true);
  });

  it('the model files are type-only: type imports, types and interfaces, nothing that runs', () => {
    const models = sourceFiles(SRC).filter((file) => MODEL_FILES.test(relative(SRC, file)));
    expect(models.map((file) => relative(SRC, file)).sort()).toEqual([
      'admin/model.ts',
      'catalog/model.ts',
      'changes/model.ts',
      'tenancy/model.ts',
      'webhooks/model.ts',
    ]);
    for (const file of models) {
      const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
      const running = source.statements.filter(
        (statement) =>
          !(
            ts.isInterfaceDeclaration(statement) ||
            ts.isTypeAliasDeclaration(statement) ||
            (ts.isImportDeclaration(statement) && statement.importClause?.isTypeOnly) ||
            (ts.isExportDeclaration(statement) && statement.isTypeOnly)
          ),
      );
      expect(running.map((statement) => `${relative(SRC, file)}: ${statement.getText(source).slice(0, 80)}`)).toEqual([]);
    }
  });
});

describe('the merchant scope (storage/merchant-scope.ts)', () => {
  // Every method of the port's interfaces, with its first parameter's name.
  const port = ts.createSourceFile('port.ts', readFileSync(join(SRC, 'storage/port.ts'), 'utf8'), ts.ScriptTarget.Latest);
  const methods = port.statements
    .filter(ts.isInterfaceDeclaration)
    .flatMap((declaration) =>
      declaration.members
        .filter(ts.isMethodSignature)
        .map((method) => ({ name: method.name.getText(port), first: method.parameters[0]?.name.getText(port) })),
    );

  it("binds every operation of the port whose first parameter is the merchant's id", () => {
    const keyedByMerchant = methods
      .filter((m) => m.first === 'merchantId')
      .map((m) => m.name)
      .sort();
    expect(keyedByMerchant.length).toBeGreaterThan(40);
    expect(keyedByMerchant.filter((name) => !(MERCHANT_KEYED as readonly string[]).includes(name))).toEqual([]);
  });

  it('names only operations the port has, each bound one way', () => {
    const names = new Set(methods.map((m) => m.name));
    const bound = [...MERCHANT_KEYED, ...MERCHANT_IN_ROW, ...STORE_KEYED];
    expect(bound.filter((name) => !names.has(name))).toEqual([]);
    expect(new Set(bound).size).toBe(bound.length);
    expect(STORE_KEYED.filter((name) => methods.find((m) => m.name === name)?.first !== 'storeId')).toEqual([]);
  });

  it("is what the catalog's and tenancy's writes use: their modules import the port for its types only", () => {
    // The aggregates' modules reach storage only through the scope (catalog/catalog-writes.ts hands it to them).
    const aggregates = [
      'catalog/stores.ts',
      'catalog/customer-groups.ts',
      'catalog/exchange-rates.ts',
      'catalog/pricing-rules.ts',
      'catalog/suppliers.ts',
      'catalog/attribute-definitions.ts',
      'catalog/products.ts',
      'catalog/product-sources.ts',
      'tenancy/api-keys.ts',
    ];
    const wrong = IMPORTS.filter((i) => aggregates.includes(i.from) && i.to === 'storage/port.ts' && !i.typeOnly);
    expect(wrong.map(describeImport)).toEqual([]);
  });

  /**
   * The domain's modules that act across merchants, each with its reason: the only ones that may call
   * the port's cross-tenant operations (CROSS_TENANT_OPERATIONS). What they then do for one merchant
   * (a claimed image's, run's or delivery's) goes through that merchant's scope like everything else.
   */
  const CROSS_TENANT_MODULES: Record<string, string> = {
    // Claims due deliveries of every merchant's endpoints, and reads the outbox of all of them.
    'webhooks/dispatcher.ts': 'the delivery worker claims work across merchants',
    // Claims due image mirrors of every merchant.
    'images/mirror.ts': 'the mirroring worker claims work across merchants',
    // Resumes the runs of every merchant whose process stopped (stalled runs, any merchant's).
    'catalog/publish-runs.ts': "a process resumes any merchant's orphaned publish runs",
    // Ends any merchant's imports whose process stopped while checking the file.
    'admin/import-jobs.ts': "a process ends any merchant's stalled imports",
    // Deletes changes older than the retention window, every store's at once.
    'changes/retention.ts': "retention prunes every merchant's history by age",
    // Deletes the admin API's idempotency keys past CPS_IDEMPOTENCY_HOURS, every credential's at once.
    'admin/idempotency-keys.ts': "retention prunes every credential's expired idempotency keys",
    // The operator's list of merchants (and its count).
    'tenancy/merchants.ts': "the operator's merchant list",
    // The public API's key check: the key's hash names the merchant, none is known before it.
    'tenancy/api-keys.ts': 'an API key is looked up by its hash, before its merchant is known',
    // Re-checks the keys every open stream and long-poll of the process holds, whichever merchants they are.
    'tenancy/held-api-keys.ts': "one lookup re-checks the keys of every merchant's open streams",
  };
  /** The port's operations over every merchant's rows: claims, prunes, listings, lookups by secret. */
  const CROSS_TENANT_OPERATIONS = new Set([
    'listMerchants',
    'countMerchants',
    'findActiveApiKey',
    'activeApiKeyIds',
    'claimDueImageMirrors',
    'claimDueDeliveries',
    'outboxGroups',
    'stalledPublishRuns',
    'interruptStalledImportJobs',
    'pruneChangesBefore',
    'pruneIdempotencyKeys',
  ]);

  // The domain's calls of the port, resolved by the type checker: which operation each call reaches,
  // and whether it reaches the port itself (a merchant id passed by hand) or a merchant's scope.
  const domainCallsOfThePort = (() => {
    const ROOT = resolve(SRC, '..');
    const config = ts.getParsedCommandLineOfConfigFile(
      join(ROOT, 'tsconfig.json'),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: () => {},
      },
    )!;
    const program = ts.createProgram({ rootNames: config.fileNames.filter((f) => f.startsWith(SRC)), options: config.options });
    const checker = program.getTypeChecker();
    const portFile = join(SRC, 'storage/port.ts');
    const calls: { file: string; line: number; operation: string; text: string }[] = [];
    for (const source of program.getSourceFiles()) {
      const file = relative(SRC, source.fileName);
      if (!inside(file, DOMAIN)) continue;
      const visit = (node: ts.Node) => {
        if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
          const declaration = checker.getResolvedSignature(node)?.declaration;
          if (declaration?.getSourceFile().fileName === portFile) {
            const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
            calls.push({ file, line, operation: node.expression.name.text, text: node.getText(source).slice(0, 80) });
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    return calls;
  })();

  it('is how every domain module reaches tenant data: none calls an operation keyed by merchant or store on the port itself', () => {
    // Every module of catalog, changes, webhooks, images, admin and tenancy, the cross-tenant ones
    // included: once a worker holds a claimed row, it acts for that row's merchant through its scope.
    const keyed = new Set<string>([...MERCHANT_KEYED, ...MERCHANT_IN_ROW, ...STORE_KEYED]);
    expect(domainCallsOfThePort.length).toBeGreaterThan(100);
    const unscoped = domainCallsOfThePort.filter((call) => keyed.has(call.operation));
    expect(unscoped.map((call) => `${call.file}:${call.line} ${call.text}`)).toEqual([]);
  });

  it('is left only by the named cross-tenant modules: no other domain module calls a cross-tenant operation', () => {
    const crossTenant = domainCallsOfThePort.filter((call) => CROSS_TENANT_OPERATIONS.has(call.operation));
    const elsewhere = crossTenant.filter((call) => !(call.file in CROSS_TENANT_MODULES));
    expect(elsewhere.map((call) => `${call.file}:${call.line} ${call.text}`)).toEqual([]);
    // The list stays true: every module named acts across merchants.
    const named = Object.keys(CROSS_TENANT_MODULES).filter((file) => !crossTenant.some((call) => call.file === file));
    expect(named).toEqual([]);
  });
});
