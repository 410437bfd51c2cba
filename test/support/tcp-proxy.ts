/**
 * A TCP proxy on 127.0.0.1 in front of a server, for partition tests: `cut()` stops forwarding
 * both ways while every socket stays open (a blackhole: nothing is refused, nothing answers, as
 * when a network drops the packets), new connections included; `heal()` delivers what waited.
 *
 *   const proxy = await startProxy(await pg.database());
 *   const store = await postgresStore(proxy.url);
 *   proxy.cut(); ... proxy.heal(); await proxy.close();
 */
import { createConnection, createServer, type Socket } from "node:net";

export interface TcpProxy {
  /** The target's URL with the proxy's port. */
  url: string;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

/** A proxy to `url`'s host and port; `url` is `url` through the proxy. */
export async function startProxy(target: string): Promise<TcpProxy> {
  const to = new URL(target);
  const sockets = new Set<Socket>();
  /** What waits while cut, per socket it is for, in order. */
  const held = new Map<Socket, Buffer[]>();
  let cut = false;
  const forward = (from: Socket, to: Socket) => {
    from.on("data", (chunk: Buffer) => {
      if (!cut) return void to.write(chunk);
      const queue = held.get(to) ?? [];
      queue.push(chunk);
      held.set(to, queue);
    });
    from.on("close", () => to.destroy());
    from.on("error", () => from.destroy());
    sockets.add(from);
    from.on("close", () => sockets.delete(from));
  };
  const server = createServer((client) => {
    const upstream = createConnection(Number(to.port), to.hostname);
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const through = new URL(target);
  through.port = String(port);
  return {
    url: through.toString(),
    cut() {
      cut = true;
    },
    heal() {
      cut = false;
      for (const [socket, queue] of held) for (const chunk of queue) socket.write(chunk);
      held.clear();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
