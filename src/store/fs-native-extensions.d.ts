/** The part of fs-native-extensions (ships no types) that data-dir.ts uses. */
declare module 'fs-native-extensions' {
  /** Exclusive lock on the whole file unless `opts.shared`; false when another holder has it. */
  export function tryLock(fd: number, opts?: { shared?: boolean }): boolean;
  export function unlock(fd: number): void;
}
