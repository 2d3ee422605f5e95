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

  it("is what the catalog's and tenancy's writes use: none of their modules calls the port with a merchant id", () => {
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
    for (const file of aggregates) {
      const text = readFileSync(join(SRC, file), 'utf8');
      expect(text, file).not.toMatch(/\b(tx|reader|storage|merchant)\.\w+\(\s*merchantId\b/);
    }
  });
});
