-- The case of scripts/bench/ranks.lua and exchange_parts.lua from their first three words:
-- cells (N or NxMxK; 20), space (Q3), cell (hex): a box distorted by 0.1, Poisson with
-- kappa = 1 + 0.5 x, Dirichlet on the whole boundary. Returns the space and the operator.
return function(cells, space, cell)
  local dims = {}
  for d in (cells or "20"):gmatch("%d+") do dims[#dims + 1] = tonumber(d) end
  if #dims == 1 then dims = {dims[1], dims[1], dims[1]} end
  local V = fe.space(mesh.box{cells = dims, cell = cell or "hex", distort = 0.1}, space or "Q3")
  return V, fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1},
                        {dirichlet = "all"})
end
