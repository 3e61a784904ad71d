output "public_url" {
  description = "URL of the public load balancer in front of the front ends."
  value       = "http://${aws_lb.frontend.dns_name}"
}

output "controller_private_address" {
  description = "Private IP address of the active controller (the one front ends and app servers register with)."
  value       = aws_instance.controller[0].private_ip
}

output "controller_url" {
  description = "Controller URL inside the VPC (CHOPPER_CONTROLLER_URL of front ends and app servers)."
  value       = local.controller_url
}

output "controller_private_addresses" {
  description = "Private IP addresses of every controller instance, the active one first."
  value       = aws_instance.controller[*].private_ip
}

output "controller_instance_ids" {
  description = "Instance ids of the controllers, for aws ssm start-session."
  value       = aws_instance.controller[*].id
}

output "table_name" {
  description = "Name of the DynamoDB table."
  value       = aws_dynamodb_table.kv.name
}

output "load_driver_instance_id" {
  description = "Instance id of the load driver for aws ssm start-session, or null when load_driver_enabled is false."
  value       = one(aws_instance.load_driver[*].id)
}

output "frontend_asg_name" {
  description = "Name of the front ends' autoscaling group."
  value       = aws_autoscaling_group.frontend.name
}

output "appserver_asg_name" {
  description = "Name of the app servers' autoscaling group."
  value       = aws_autoscaling_group.appserver.name
}

output "vpc_id" {
  description = "VPC the cluster runs in."
  value       = local.vpc_id
}
