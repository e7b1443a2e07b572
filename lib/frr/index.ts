export { type AnnouncementBatcher, createAnnouncementBatcher } from './batcher.ts'
export {
  type AnnouncementSource,
  createFrrController,
  type FrrController,
  type FrrControllerOptions,
  type Outcome,
  RESYNC_MAX_WITHDRAWALS,
  type ResyncOptions,
  type ResyncResult,
  resync,
} from './controller.ts'
export { AckTimeoutError, NoBgpInstanceError, PrefixNotOwnedError, VtyshError } from './errors.ts'
export { type ChangeGate, createChangeGate } from './gate.ts'
export { type Announcement, renderBgpdConfig, routeMapName } from './render.ts'
export { BgpSettings, type BgpSettingsInput, parseBgpSettings } from './settings.ts'
export {
  type FrrState,
  parseBgpTable,
  parseRunningConfig,
  planChanges,
  planResync,
  type ResyncPlan,
  type Wanted,
} from './state.ts'
export { createVtysh, type Vtysh, type VtyshOptions } from './vtysh.ts'
