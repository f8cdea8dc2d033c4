-- Argo CD health check for poolsmith.dev/WorkloadClass. Install it in argocd-cm as
-- resource.customizations.health.poolsmith.dev_WorkloadClass (see kustomization.yaml
-- beside this file). Healthy when Ready is True for the current generation; Degraded when
-- Synced or Ready is False for it; Progressing otherwise (not yet reconciled, awaiting
-- Karpenter, or being deleted). Argo CD opens only Lua's base, table and package
-- libraries: no string.*, math.* or os.* here.
--
-- While the class is being deleted, Argo CD shows hs.deletionMessage (its own "Pending
-- deletion" text when unset): it says which NodePools, NodeOverlays and EC2NodeClass the
-- finalizer is still deleting.
local hs = { status = "Progressing", message = "Waiting for Poolsmith to reconcile" }
local deleting = obj.metadata.deletionTimestamp ~= nil
if deleting then
  hs.message = "Waiting for Poolsmith to delete the class's NodePools and EC2NodeClass"
  hs.deletionMessage = hs.message
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local generation = obj.metadata.generation
local synced, ready
for _, c in ipairs(obj.status.conditions) do
  if c.observedGeneration == generation then
    if c.type == "Synced" then synced = c end
    if c.type == "Ready" then ready = c end
  end
end
local function describe(c)
  local msg = c.type .. "=" .. c.status .. " (" .. c.reason .. ")"
  if c.message ~= nil and c.message ~= "" then
    msg = msg .. ": " .. c.message
  end
  return msg
end
if deleting then
  if synced ~= nil and synced.reason == "Deleting" then
    hs.message = describe(synced)
    hs.deletionMessage = hs.message
  end
  return hs
end
if synced ~= nil and synced.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(synced)
  return hs
end
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(ready)
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
if ready ~= nil then
  hs.message = describe(ready)
elseif synced ~= nil then
  hs.message = describe(synced)
else
  hs.message = "Waiting for Poolsmith to reconcile generation " .. tostring(generation)
end
return hs
