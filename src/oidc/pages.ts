/**
 * The HTML pages of the OIDC login steps, for a person at a browser (upstream serves the same
 * steps as small forms): the password form, the TOTP form, and TOTP enrollment (start, then the
 * QR code, recovery codes and a code form). Each form posts back to its `/oidc/login/...` step
 * with the authorization request's id; every value shown is escaped.
 */
import escapeHtml from 'escape-html';

export interface PageEnrollment {
  provisioningUrl: string;
  recoveryCodes: string[];
  /** `data:image/png;base64,…` of the provisioning URL's QR code. */
  qrDataUri: string;
}

function page(title: string, body: string, error?: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${escapeHtml(title)}</title><style>body{font-family:sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}` +
    `label{display:block;margin:.75rem 0}input{display:block;width:100%;padding:.4rem;box-sizing:border-box}` +
    `button{margin-top:1rem;padding:.5rem 1.5rem}.error{color:#b00020}code{word-break:break-all}</style></head><body>` +
    `<h1>${escapeHtml(title)}</h1>` +
    (error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : '') +
    body +
    `</body></html>`
  );
}

const idField = (id: string) => `<input type="hidden" name="id" value="${escapeHtml(id)}">`;

export function loginPage(id: string, error?: string): string {
  return page(
    'Log in',
    `<form method="post" action="/oidc/login/password">${idField(id)}` +
      `<label>Username <input name="username" autocomplete="username" required autofocus></label>` +
      `<label>Password <input name="password" type="password" autocomplete="current-password" required></label>` +
      `<button type="submit">Log in</button></form>`,
    error,
  );
}

export function totpPage(id: string, error?: string): string {
  return page(
    'Authenticator code',
    `<p>Enter the code your authenticator app shows.</p><form method="post" action="/oidc/login/totp">${idField(id)}` +
      `<label>Code <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required autofocus></label>` +
      `<button type="submit">Verify</button></form>`,
    error,
  );
}

/** The login needs TOTP and the identity has none: offer to set it up. */
export function enrollStartPage(id: string, error?: string): string {
  return page(
    'Set up an authenticator',
    `<p>This login requires a one-time code from an authenticator app, and none is set up for you yet.</p>` +
      `<form method="post" action="/oidc/login/totp/enroll">${idField(id)}<button type="submit">Set up</button></form>`,
    error,
  );
}

export function enrollPage(id: string, e: PageEnrollment, error?: string): string {
  const secret = new URL(e.provisioningUrl).searchParams.get('secret') ?? '';
  return page(
    'Set up an authenticator',
    `<p>Scan this code with your authenticator app, or enter the secret <code id="secret">${escapeHtml(secret)}</code>.</p>` +
      `<img id="qr" alt="QR code of the authenticator secret" width="256" height="256" src="${escapeHtml(e.qrDataUri)}">` +
      `<p>Keep these recovery codes; each one works once if the app is lost:</p>` +
      `<ul id="recovery-codes">${e.recoveryCodes.map((c) => `<li><code>${escapeHtml(c)}</code></li>`).join('')}</ul>` +
      `<form method="post" action="/oidc/login/totp/enroll/verify">${idField(id)}` +
      `<label>Code from the app <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required></label>` +
      `<button type="submit">Verify</button></form>`,
    error,
  );
}
