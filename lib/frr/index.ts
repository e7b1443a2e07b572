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
export {
  AckTimeoutError,
  InvalidAnnouncementError,
  NoBgpInstanceError,
  PrefixNotOwnedError,
  VtyshError,
} from './errors.ts'
export { type ChangeGate, createChangeGate } from './gate.ts'
export {
  announcementProblem,
  canonicalIp,
  IP_FAMILIES,
  type IpFamily,
  ipFamily,
  prefixFamily,
  publicPrefix,
} from './prefix.ts'
export {
  type Announcement,
  renderBgpdConfig,
  routeMapLines,
  routeMapName,
  startupOrder,
} from './render.ts'
export { BgpSettings, type BgpSettingsInput, parseBgpSettings } from './settings.ts'
export {
  announcementsIn,
  applyPlan,
  type FrrModel,
  type FrrState,
  parseBgpPrefix,
  parseBgpTable,
  parseRunningConfig,
  planChanges,
  planResync,
  type ResyncPlan,
  toModel,
  type Wanted,
} from './state.ts'
export { createVty, type Vty, type VtyOptions, type VtyReply } from './vty.ts'
export { createVtysh, type Vtysh, type VtyshOptions } from './vtysh.ts'
