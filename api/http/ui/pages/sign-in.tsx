/** `/ui/sign-in`: the token form (operator or tenant token), posted once, never kept. */
import { Layout } from '../layout.tsx'

export function SignInPage(props: { error?: string }) {
  return (
    <Layout title="Sign in" page="sign-in">
      <div class="signin">
        <h1>Sign in to Hydrazine</h1>
        <p class="lead">
          Use the operator token, or your tenant's token: a tenant sees only its own groups and
          hosts.
        </p>
        {props.error ? (
          <p class="error" role="alert" id="sign-in-error">
            {props.error}
          </p>
        ) : null}
        <form method="post" action="/ui/sign-in">
          <label for="token">API token</label>
          <input
            id="token"
            name="token"
            type="password"
            autocomplete="off"
            required
            autofocus
            {...(props.error
              ? { 'aria-describedby': 'sign-in-error', 'aria-invalid': 'true' }
              : {})}
          />
          <p>
            <button type="submit" class="primary">
              Sign in
            </button>
          </p>
        </form>
      </div>
    </Layout>
  )
}
