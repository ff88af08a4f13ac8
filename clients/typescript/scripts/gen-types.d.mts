// Types of scripts/gen-types.mjs, for the tests that import it.
export const OUTPUT: string;
export function tsType(schema: unknown, indent?: string): string;
export function generate(doc: unknown): string;
export function load(source: string): Promise<unknown>;
