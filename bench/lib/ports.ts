/** Ports for the processes a benchmark or test starts besides the controller (which takes port 0 itself). */
import net from 'node:net';

/** A port the kernel just handed out on 127.0.0.1 (free at the time of the call). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
