/**
 * The controller's log destination (stdout, for pino): lines are encoded at once into a byte
 * buffer and written by one asynchronous write every FLUSH_MS, so the event loop never waits on
 * the reader of stdout and an access-log line costs one Buffer#write (at 50k requests/s, ~500
 * lines per write(2)).
 *
 * Why not pino's own destinations: the synchronous one makes a write(2) per line (blocked
 * whenever the reader lagged); the asynchronous one (sonic-boom) re-measures its pending string on
 * every line with Buffer.byteLength, flattening it each time. Writing per event-loop turn instead
 * of per FLUSH_MS wakes a thread-pool thread far more often, and keeping the lines as strings until
 * the write made them survive young-generation collections. Measurements: docs/benchmarks.md
 * ("Measurements behind the code") and docs/policy.md.
 *
 * While the reader is stuck, at most `maxPendingBytes` wait; later lines are dropped and counted
 * (a line with the count is written once writing resumes). Pending lines are written synchronously
 * when the process exits.
 */
import fs from 'node:fs';

/** How long a line may wait for the lines after it. */
const FLUSH_MS = 10;
const INITIAL_BYTES = 64 * 1024;

export class LogStream {
  private buf = Buffer.allocUnsafe(INITIAL_BYTES);
  private len = 0;
  private writing = false;
  private timer?: NodeJS.Timeout;
  private dropped = 0;

  constructor(
    private readonly fd: number,
    private readonly maxPendingBytes: number,
  ) {
    process.on('exit', () => this.flushSync());
  }

  /** pino's stream interface. */
  write(line: string): boolean {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.len + line.length * 3 > this.buf.length && !this.grow(this.len + line.length * 3)) {
      this.dropped++;
      return false;
    }
    this.len += this.buf.write(line, this.len);
    if (!this.writing && !this.timer) this.schedule();
    return true;
  }

  private grow(need: number): boolean {
    if (need > this.maxPendingBytes) return false;
    const next = Buffer.allocUnsafe(Math.min(this.maxPendingBytes, Math.max(need, this.buf.length * 2)));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
    return true;
  }

  private schedule() {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.writing) this.writeBatch(this.take());
    }, FLUSH_MS);
    this.timer.unref();
  }

  /** The pending bytes; the next lines go to a fresh buffer (the write keeps reading these). */
  private take(): Buffer {
    if (this.dropped > 0) {
      const note = JSON.stringify({ level: 40, time: Date.now(), msg: `${this.dropped} log lines dropped: stdout was not read` }) + '\n';
      this.dropped = 0;
      if (this.len + note.length * 3 <= this.buf.length || this.grow(this.len + note.length * 3)) this.len += this.buf.write(note, this.len);
    }
    const data = this.buf.subarray(0, this.len);
    this.buf = Buffer.allocUnsafe(Math.max(INITIAL_BYTES, this.len));
    this.len = 0;
    return data;
  }

  private writeBatch(data: Buffer) {
    this.writing = true;
    fs.write(this.fd, data, 0, data.length, null, (err, written) => {
      if (err) {
        // EAGAIN (a non-blocking pipe is full): try again shortly; anything else drops the batch.
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return void setTimeout(() => this.writeBatch(data), 10).unref();
        written = data.length;
      }
      if (written < data.length) return this.writeBatch(data.subarray(written));
      this.writing = false;
      if (this.len > 0) this.schedule();
    });
  }

  /** Write what is pending now (process exit). A batch already in flight completes on its own thread. */
  flushSync(): void {
    clearTimeout(this.timer);
    if (this.len === 0 && this.dropped === 0) return;
    let data = this.take();
    for (let tries = 0; data.length > 0 && tries < 1000; tries++) {
      try {
        data = data.subarray(fs.writeSync(this.fd, data));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      }
    }
  }
}
