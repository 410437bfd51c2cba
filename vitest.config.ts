import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 20_000,
    globalSetup: ["test/support/temp-dir.ts"],
    setupFiles: ["test/support/scripted-steps.ts"],
  },
});
