import t from 'tap'
import { debianMirrorIn } from './debian-ovn.ts'

t.test("the Debian 13 root comes from apt's own Debian mirror", async (t) => {
  const sources: [string, string, string | undefined][] = [
    [
      'deb822',
      'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n',
      'http://deb.debian.org/debian',
    ],
    [
      'security first, then the archive',
      'URIs: http://deb.debian.org/debian-security\n\nURIs: https://mirror.example/debian/\n',
      'https://mirror.example/debian',
    ],
    [
      'one-line, with options',
      '# deb http://old/debian bookworm main\ndeb [arch=amd64] http://ftp.de.debian.org/debian bookworm main\n',
      'http://ftp.de.debian.org/debian',
    ],
    [
      'another archive only',
      'deb https://packages.cloud.google.com/apt cloud-sdk main\n',
      undefined,
    ],
    ['none', '', undefined],
  ]
  for (const [name, text, mirror] of sources) t.equal(debianMirrorIn(text), mirror, name)
})
