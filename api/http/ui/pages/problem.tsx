/** What the UI answers when it cannot do what was asked: the status, why, and the bad fields. */
import { type Frame, Layout } from '../layout.tsx'

export function ProblemPage(props: {
  frame?: Frame | undefined
  status: number
  title: string
  message: string
  issues?: readonly { path: string; message: string }[] | undefined
}) {
  return (
    <Layout title={props.title} frame={props.frame} page="problem">
      <h1>{props.title}</h1>
      <p class="error" role="alert">
        {props.message}
      </p>
      {props.issues && props.issues.length > 0 ? (
        <ul aria-label="Fields">
          {props.issues.map((i) => (
            <li>
              <code>{i.path}</code>
              {`: ${i.message}`}
            </li>
          ))}
        </ul>
      ) : null}
      <p>
        <a href="/ui/">Back to the overview</a>
      </p>
    </Layout>
  )
}
