/**
 * From config to PreparedCode, once at start-up: load the code (inline or from a file), strip its
 * TypeScript types, take API Maker's forms as written (api-maker-forms.ts: its typings import, its CommonJS
 * export), check its syntax and that it declares `main`, digest it, and place it (isolate or sandbox, isolate-safe.ts).
 * Every problem is a ConfigError naming the event: the node refuses to start.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { parse, type Program } from 'acorn';
import { ConfigError } from '../errors.ts';
import { withApiMakerForms } from './api-maker-forms.ts';
import type { PreparedCode, RunnerChoice } from './code-runner.ts';
import { boundNames, FUNCTION_TYPES, isNode, whyNotIsolateSafe, type AnyNode } from './isolate-safe.ts';
import { withoutNeedlessAsync } from './sync-main.ts';

/** An event's `canConnect` in the config: exactly one of `code` and `file`. */
export interface CanConnectConfig {
  code?: string | undefined;
  /** An absolute path: the config loader resolves it against the config file's directory. */
  file?: string | undefined;
  /** Default 'auto': isolate-safe code to an isolate, the rest to the sandbox. */
  runner?: RunnerChoice | undefined;
}

/** Every event that has `canConnect`, prepared; events sharing a source share its id. */
export function prepareEvents(
  events: Record<string, { canConnect?: CanConnectConfig | undefined }>,
): Map<string, PreparedCode> {
  const prepared = new Map<string, PreparedCode>();
  for (const [event, { canConnect }] of Object.entries(events)) {
    if (canConnect) prepared.set(event, prepareCode(event, canConnect));
  }
  return prepared;
}

export function prepareCode(event: string, config: CanConnectConfig): PreparedCode {
  const field = `events.${event}.canConnect`;
  const stripped = stripTypes(field, loadText(field, config));
  const parsed = parseModule(field, stripped);
  const source = withApiMakerForms(field, parsed, stripped);
  const program = source === stripped ? parsed : parseModule(field, source);
  const { declaresMain, exportsMain, main } = findMain(program);
  if (!declaresMain && !exportsMain) throw new ConfigError(`${field}: the code must declare a top-level function main(g)`);
  const reasons = whyNotIsolateSafe(program);
  const runner = config.runner ?? 'auto';
  if (runner === 'isolate' && (exportsMain || reasons.some((reason) => reason.includes('module syntax')))) {
    throw new ConfigError(`${field}: runner 'isolate' cannot run module code (import or export): use 'sandbox' or 'auto'`);
  }
  const inIsolate = runner === 'auto' ? reasons.length === 0 : runner === 'isolate';
  const runnable = withoutNeedlessAsync(program, source, main);
  const id = createHash('sha256').update(runnable).digest('hex');
  return { event, id, source: runnable, exportsMain, inIsolate, reasons };
}

function loadText(field: string, { code, file }: CanConnectConfig): string {
  if ((code === undefined) === (file === undefined)) throw new ConfigError(`${field}: set exactly one of code and file`);
  if (code !== undefined) return code;
  const path = file as string;
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`${field}: cannot read ${path}: ${(error as Error).message}`);
  }
}

/**
 * Node 24 flags stripTypeScriptTypes as experimental with a one-time ExperimentalWarning. It runs only
 * here, at start-up, and tests pin its behaviour, so the warning tells an operator nothing: it is
 * dropped, and only it (every other warning passes through while the call runs).
 */
function stripTypes(field: string, text: string): string {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const message = typeof warning === 'string' ? warning : warning.message;
    if (!message.startsWith('stripTypeScriptTypes')) Reflect.apply(emitWarning, process, [warning, ...rest]);
  }) as typeof process.emitWarning;
  try {
    return stripTypeScriptTypes(text, { mode: 'strip' });
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    if (code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX') {
      throw new ConfigError(`${field}: ${message} (types are stripped, not compiled: no enum, namespace or parameter property)`);
    }
    throw new ConfigError(`${field}: syntax error: ${message}`);
  } finally {
    process.emitWarning = emitWarning;
  }
}

function parseModule(field: string, source: string): Program {
  try {
    return parse(source, { ecmaVersion: 'latest', sourceType: 'module', locations: true });
  } catch (error) {
    throw new ConfigError(`${field}: syntax error: ${(error as Error).message}`);
  }
}

/**
 * main may be declared (`function main`, `const main = ...`) and may be exported (`export function main`,
 * `export { x as main }`); `main` is its function when it is declared as one.
 */
function findMain(program: Program): { declaresMain: boolean; exportsMain: boolean; main: AnyNode | undefined } {
  let declaresMain = false;
  let exportsMain = false;
  let main: AnyNode | undefined;
  const declares = (node: unknown): boolean => {
    if (!isNode(node)) return false;
    if (node.type === 'FunctionDeclaration' && boundNames(node.id).includes('main')) {
      main = node;
      return true;
    }
    if (node.type !== 'VariableDeclaration') return false;
    const declarator = (node.declarations as AnyNode[]).find((each) => boundNames(each.id).includes('main'));
    if (isNode(declarator?.init) && FUNCTION_TYPES.has(declarator.init.type)) main = declarator.init;
    return declarator !== undefined;
  };
  for (const statement of program.body) {
    if (declares(statement)) declaresMain = true;
    if (statement.type !== 'ExportNamedDeclaration') continue;
    if (declares(statement.declaration)) exportsMain = true;
    for (const { exported } of statement.specifiers) {
      if ((exported.type === 'Identifier' ? exported.name : exported.value) === 'main') exportsMain = true;
    }
  }
  return { declaresMain, exportsMain, main };
}
