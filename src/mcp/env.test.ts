import { describe, expect, it } from "vitest";
import { childEnvironment } from "./env.js";

describe("childEnvironment", () => {
  const parent = {
    PATH: "/usr/bin",
    HOME: "/home/u",
    HTTPS_PROXY: "http://proxy:3128",
    http_proxy: "http://proxy:3128",
    NO_PROXY: "localhost",
    ALL_PROXY: "socks5://proxy:1080",
    NODE_EXTRA_CA_CERTS: "/etc/corp-ca.pem",
    SSL_CERT_FILE: "/etc/ssl/cert.pem",
    SSL_CERT_DIR: "/etc/ssl/certs",
    REQUESTS_CA_BUNDLE: "/etc/ssl/bundle.pem",
    npm_config_registry: "https://npm.corp/",
    "npm_config_@corp:registry": "https://npm.corp/corp/",
    npm_config_cache: "/tmp/npm-cache",
    "npm_config_//npm.corp/:_authToken": "npm-secret",
    npm_config__auth: "basic-secret",
    npm_lifecycle_event: "test",
    XDG_CACHE_HOME: "/home/u/.cache",
    LANG: "en_US.UTF-8",
    LC_ALL: "C",
    TMPDIR: "/tmp",
    OPENAI_API_KEY: "sk-secret",
    OPENAI_BASE_URL: "http://localhost:11434/v1",
    ANTHROPIC_API_KEY: "anthropic-secret",
    AGENTLOOP_API_KEY: "server-secret",
    AGENTLOOP_MODEL: "gpt-4o-mini",
    GITHUB_TOKEN: "ghp-secret",
    AWS_SECRET_ACCESS_KEY: "aws-secret",
    DATABASE_URL: "postgres://user:pass@db/app",
    BASH_FUNC_x: "() { echo; }",
    SHELL: "() { echo; }",
  };

  it("passes proxies, CA bundles, npm's registry and cache, XDG, locale and temp; never keys", () => {
    expect(childEnvironment(undefined, parent)).toEqual({
      PATH: "/usr/bin",
      HOME: "/home/u",
      HTTPS_PROXY: "http://proxy:3128",
      http_proxy: "http://proxy:3128",
      NO_PROXY: "localhost",
      ALL_PROXY: "socks5://proxy:1080",
      NODE_EXTRA_CA_CERTS: "/etc/corp-ca.pem",
      SSL_CERT_FILE: "/etc/ssl/cert.pem",
      SSL_CERT_DIR: "/etc/ssl/certs",
      REQUESTS_CA_BUNDLE: "/etc/ssl/bundle.pem",
      npm_config_registry: "https://npm.corp/",
      "npm_config_@corp:registry": "https://npm.corp/corp/",
      npm_config_cache: "/tmp/npm-cache",
      XDG_CACHE_HOME: "/home/u/.cache",
      LANG: "en_US.UTF-8",
      LC_ALL: "C",
      TMPDIR: "/tmp",
    });
  });

  it("adds the entry's own env, which wins and may name a key", () => {
    const env = childEnvironment({ OPENAI_API_KEY: "named", HTTPS_PROXY: "http://other:8080" }, parent);
    expect(env.OPENAI_API_KEY).toBe("named");
    expect(env.HTTPS_PROXY).toBe("http://other:8080");
    expect(env.ANTHROPIC_API_KEY).toBeUndefined();
  });

  it("keeps awkward names as ordinary own keys", () => {
    const own = JSON.parse('{"__proto__": "p", "constructor": "c"}') as Record<string, string>;
    const env = childEnvironment(own, { PATH: "/bin" });
    expect(Object.keys(env)).toEqual(["PATH", "__proto__", "constructor"]);
    expect(Object.getPrototypeOf(env)).toBe(Object.prototype);
  });
});
