// Misuses of @chopper/client the declarations must reject (see misuse.ts).
import { createClient, readCredential, type ChopperClient } from '@chopper/client'

// @ts-expect-error unknown option
createClient({ controlerUrl: 'http://127.0.0.1:7070' })
// @ts-expect-error unknown replica choice
createClient({ controllerUrl: 'http://127.0.0.1:7070', replicaChoice: 'best' })
// @ts-expect-error timings are numbers
createClient({ members: ['http://127.0.0.1:9001'], holdMs: '100' })
// @ts-expect-error the credential derives from the token, a string
readCredential(42)

declare const client: ChopperClient
// @ts-expect-error keys are strings
client.lookup(42)
// @ts-expect-error readonly
client.generation = 3
// A Dispatcher: undici's request options are checked too.
// @ts-expect-error path is required
client.request({ method: 'GET' })
