// Generates tests/clients/ts/generated/schema.d.ts with openapi-typescript's Node API, so
// that `format: binary` becomes `Blob` (the documented way: the CLI maps it to `string`).
// Usage: node gen.mjs OPENAPI.json OUT.d.ts
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";

const [input, output] = process.argv.slice(2);
const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const NULL = ts.factory.createLiteralTypeNode(ts.factory.createNull());
const ast = await openapiTS(new URL(`file://${path.resolve(input)}`), {
  transform(schema) {
    if (schema.format === "binary") {
      const nullable = Array.isArray(schema.type) && schema.type.includes("null");
      return nullable ? ts.factory.createUnionTypeNode([BLOB, NULL]) : BLOB;
    }
  },
});
fs.mkdirSync(path.dirname(output), { recursive: true });
fs.writeFileSync(output, astToString(ast));
console.log(`openapi-typescript: ${input} → ${output} (${fs.statSync(output).size} bytes)`);
