/**
 * The confirmation step of every action (force-delete, re-drive, reconcile now): a page
 * saying what will happen, with a form that does it (POST, with the session's CSRF token)
 * and a way back. A destructive action also asks for the object's name to be typed.
 */
import { type Frame, Layout } from '../layout.tsx'

export function ConfirmPage(props: {
  frame: Frame
  title: string
  /** What will happen, in a sentence or two. */
  message: string
  action: string
  button: string
  back: string
  danger?: boolean
  /** The name to type before a destructive action runs. */
  typeName?: string
}) {
  return (
    <Layout title={props.title} frame={props.frame} page="confirm">
      <h1>{props.title}</h1>
      <p>{props.message}</p>
      <form method="post" action={props.action}>
        <input type="hidden" name="csrf" value={props.frame.csrf} />
        {props.typeName ? (
          <>
            <label for="confirm">{`Type ${props.typeName} to confirm`}</label>
            <input id="confirm" name="confirm" required autocomplete="off" autofocus />
          </>
        ) : (
          <input type="hidden" name="confirm" value="yes" />
        )}
        <div class="actions">
          <button type="submit" class={props.danger ? 'danger' : 'primary'}>
            {props.button}
          </button>
          <a class="button" href={props.back}>
            Cancel
          </a>
        </div>
      </form>
    </Layout>
  )
}
