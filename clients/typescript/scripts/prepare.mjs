// npm's `prepare`: builds dist/ when the package is installed from a path or packed
// (`npm install ./clients/typescript`, `npm pack`). A path install links this folder without
// its devDependencies, so TypeScript is installed here first when it is missing.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL("..", import.meta.url));
const tsc = `${here}node_modules/typescript/bin/tsc`;
if (!existsSync(tsc)) {
  // the outer npm's settings (npm_config_*) are for the project installing us, not this folder
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  execFileSync(npm, ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: here, env, stdio: "inherit" });
}
execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: here, stdio: "inherit" });
